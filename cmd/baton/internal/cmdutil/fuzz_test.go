package cmdutil

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/session"
)

// usageError fails t unless err is bad input: exit code 2 through Code, and
// a one-line message for verb that contains every one of rule.
func usageError(t *testing.T, what string, err error, rule ...string) {
	t.Helper()
	if Code(err) != ExitUsage {
		t.Fatalf("%s: %v maps to exit %d, want %d (bad input)", what, err, Code(err), ExitUsage)
	}
	msg := Message("join", err)
	if !strings.HasPrefix(msg, "baton: join: ") || strings.Contains(msg, "\n") {
		t.Fatalf("%s: message %q is not one line of the contract", what, msg)
	}
	for _, r := range rule {
		if !strings.Contains(msg, r) {
			t.Fatalf("%s: message %q does not state %q", what, msg, r)
		}
	}
}

// FuzzValidSlot checks the SLOT and KEY arguments of every verb: one is
// accepted exactly when nats.go's jetstream accepts it as a key and it
// follows kv.KeyRule (no '/', at most kv.MaxKeyLen); a refusal is bad input
// (exit 2) whose one-line message names the argument and quotes the rule.
func FuzzValidSlot(f *testing.F) {
	for _, seed := range []string{
		"rendering", "a", "A-Z_a-z=0.9", "team.bot.1", strings.Repeat("s", kv.MaxKeyLen),
		"", ".", "a.", ".a", "a..b", "a/b", "a b", "a\nb", "a*", "a>", "é", "\xff", strings.Repeat("s", kv.MaxKeyLen+1),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := kvtest.NATSKeyValid(s) && !strings.Contains(s, "/") && len(s) <= kv.MaxKeyLen
		for _, tc := range []struct {
			what string
			err  error
		}{
			{"slot", ValidSlot("slot", s)},
			{"slot", OneSlot("baton join SLOT --task ID")(nil, []string{s})},
			{"key", OneKey("baton lease get KEY")(nil, []string{s})},
		} {
			if (tc.err == nil) != want {
				t.Fatalf("%s %q: %v; want ok=%v (jetstream and kv.KeyRule)", tc.what, s, tc.err, want)
			}
			if tc.err != nil {
				usageError(t, tc.what+" "+s, tc.err, tc.what+" ", kv.KeyRule)
			}
		}
		for _, args := range [][]string{nil, {s, s}} {
			if err := OneSlot("baton join SLOT --task ID")(nil, args); err == nil {
				t.Fatalf("OneSlot(%q) took %d arguments", args, len(args))
			} else if len(args) != 1 {
				usageError(t, "slots "+strings.Join(args, " "), err, "want exactly one SLOT")
			}
		}
	})
}

// FuzzFlagValues checks the values of duration flags, --meta and the
// environment the global flags fall back to. The input is NUL-separated
// values. A duration is taken exactly when time.ParseDuration takes it and
// it is not negative, and then reads back as itself; --meta pairs are taken
// when each is KEY=VALUE with a key, within the limits, and the last value
// of a key wins; BATON_TIMEOUT and BATON_PREFIX give a positive timeout and
// a valid prefix or bad input. Every refusal is exit 2 with a message that
// says the rule.
func FuzzFlagValues(f *testing.F) {
	for _, seed := range []string{
		"90s", "0s", "1h30m\x00k=v\x00x=y=z", "1.5s\x00k=\x00k=v2", "500ms\x00a=b", "-0s", "2562047h47m16.854775807s",
		"", "soon", "-1s", "10", "1e3s", "9223372036854775808ns", "5s\x00=v", "5s\x00novalue", "-1s\x00prefix.with.dots",
		"1s\x00" + strings.Repeat("k", MaxMetaKeyLen+1) + "=v", "1s\x00k=" + strings.Repeat("v", MaxMetaValueLen+1),
		"1s" + strings.Repeat("\x00k=v", MaxMetaPairs+1),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts := strings.Split(s, "\x00")

		// A duration flag.
		fl := NewDurationFlag("ttl", 15*time.Minute)
		err := fl.Set(parts[0])
		d, perr := time.ParseDuration(parts[0])
		if want := perr == nil && d >= 0; (err == nil) != want {
			t.Fatalf("--ttl %q: %v; want ok=%v (time.ParseDuration: %v, %v)", parts[0], err, want, d, perr)
		}
		if err != nil {
			rule := "not a duration; use a number with a unit"
			if perr == nil {
				rule = "must not be negative"
			}
			usageError(t, "--ttl "+parts[0], err, "--ttl", rule)
		} else {
			again := NewDurationFlag("ttl", 0)
			if fl.D != d || !fl.IsSet() || again.Set(fl.String()) != nil || again.D != fl.D {
				t.Fatalf("--ttl %q = %v (set %v), which reads back as %v", parts[0], fl.D, fl.IsSet(), again.D)
			}
		}

		// --meta.
		pairs := parts[1:]
		meta, err := ParseMeta(pairs)
		if err != nil {
			usageError(t, "--meta", err, "--meta")
		} else {
			if len(pairs) > MaxMetaPairs || len(pairs) > 0 && meta == nil {
				t.Fatalf("ParseMeta(%q) took %d pairs: %v", pairs, len(pairs), meta)
			}
			want := map[string]string{}
			for _, p := range pairs {
				k, v, ok := strings.Cut(p, "=")
				if !ok || k == "" || len(k) > MaxMetaKeyLen || len(v) > MaxMetaValueLen {
					t.Fatalf("ParseMeta took %q", p)
				}
				want[k] = v
			}
			if len(meta) != len(want) {
				t.Fatalf("ParseMeta(%q) = %v, want %v", pairs, meta, want)
			}
			for k, v := range want {
				if meta[k] != v {
					t.Fatalf("ParseMeta(%q)[%q] = %q, want %q (the last one)", pairs, k, meta[k], v)
				}
			}
		}

		// The environment behind --timeout and --prefix.
		env := map[string]string{"BATON_TIMEOUT": parts[0]}
		if len(parts) > 1 {
			env["BATON_PREFIX"] = parts[1]
		}
		var c Config
		c.Register(pflag.NewFlagSet("baton", pflag.ContinueOnError))
		if err := c.Resolve(func(k string) string { return env[k] }); err != nil {
			usageError(t, "environment "+s, err)
			return
		}
		if c.Timeout <= 0 || session.ValidatePrefix(c.Prefix) != nil {
			t.Fatalf("environment %q resolved to timeout %v, prefix %q", env, c.Timeout, c.Prefix)
		}
		if parts[0] != "" && c.Timeout != d {
			t.Fatalf("BATON_TIMEOUT=%q resolved to %v, want %v", parts[0], c.Timeout, d)
		}
	})
}
