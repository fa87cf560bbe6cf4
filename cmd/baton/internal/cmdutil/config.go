package cmdutil

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// Config holds the global flags, resolved against the environment once the
// command line is parsed.
type Config struct {
	Server   string
	Context  string
	Creds    string
	NKey     string
	User     string
	Password string
	Token    string
	TLSCA    string
	TLSCert  string
	TLSKey   string
	Inbox    string
	Prefix   string
	HostID   string
	StateDir string
	JSON     bool
	Timeout  time.Duration

	timeout *DurationFlag
	flags   *pflag.FlagSet
}

// Register adds the global flags to fs.
func (c *Config) Register(fs *pflag.FlagSet) {
	c.flags = fs
	fs.StringVarP(&c.Server, "server", "s", "", "NATS server URL (env BATON_URL, NATS_URL; default: the server a running 'baton up' wrote, else "+kv.DefaultURL+")")
	fs.StringVar(&c.Context, "context", "", "nats CLI context name (env NATS_CONTEXT)")
	fs.StringVar(&c.Creds, "creds", "", "NATS credentials file (env NATS_CREDS)")
	fs.StringVar(&c.NKey, "nkey", "", "NATS nkey seed file (env NATS_NKEY)")
	fs.StringVar(&c.User, "user", "", "NATS user (env NATS_USER)")
	fs.StringVar(&c.Password, "password", "", "NATS password (env NATS_PASSWORD)")
	fs.StringVar(&c.Token, "token", "", "NATS token (env NATS_TOKEN)")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "CA file to verify the server (env NATS_CA)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "client certificate file (env NATS_CERT)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "client key file (env NATS_KEY)")
	fs.StringVar(&c.Inbox, "inbox-prefix", "", "subject prefix of reply inboxes, for a user the server gives inboxes of its own (env BATON_INBOX_PREFIX; default: the context's, else _INBOX)")
	fs.StringVar(&c.Prefix, "prefix", "", "bucket prefix: buckets are PREFIX-sessions, ... (env BATON_PREFIX; default "+session.DefaultPrefix+")")
	fs.StringVar(&c.HostID, "host-id", "", "this host's id (env BATON_HOST_ID; default the hostname)")
	fs.StringVar(&c.StateDir, "state-dir", "", "host-local state directory (env BATON_STATE_DIR; default $XDG_STATE_HOME/baton or ~/.local/state/baton)")
	fs.BoolVar(&c.JSON, "json", false, "print one JSON document (JSON lines with --watch)")
	c.timeout = NewDurationFlag("timeout", kv.DefaultTimeout)
	fs.Var(c.timeout, "timeout", "bound on each call to the server (env BATON_TIMEOUT)")
}

// Resolve fills unset flags from the environment and checks them.
func (c *Config) Resolve(getenv func(string) string) error {
	pick := func(dst *string, flag string, envs ...string) {
		if c.flags != nil && c.flags.Changed(flag) {
			return
		}
		for _, e := range envs {
			if v := getenv(e); v != "" {
				*dst = v
				return
			}
		}
	}
	pick(&c.Server, "server", "BATON_URL", "NATS_URL")
	pick(&c.Context, "context", "NATS_CONTEXT")
	pick(&c.Creds, "creds", "NATS_CREDS")
	pick(&c.NKey, "nkey", "NATS_NKEY")
	pick(&c.User, "user", "NATS_USER")
	pick(&c.Password, "password", "NATS_PASSWORD")
	pick(&c.Token, "token", "NATS_TOKEN")
	pick(&c.TLSCA, "tls-ca", "NATS_CA")
	pick(&c.TLSCert, "tls-cert", "NATS_CERT")
	pick(&c.TLSKey, "tls-key", "NATS_KEY")
	pick(&c.Inbox, "inbox-prefix", "BATON_INBOX_PREFIX")
	pick(&c.Prefix, "prefix", "BATON_PREFIX")
	pick(&c.HostID, "host-id", "BATON_HOST_ID")
	pick(&c.StateDir, "state-dir", "BATON_STATE_DIR")

	if c.Prefix == "" {
		c.Prefix = session.DefaultPrefix
	}
	if err := session.ValidatePrefix(c.Prefix); err != nil {
		return Usagef("--prefix: %v", strings.TrimPrefix(err.Error(), "session: invalid input: "))
	}
	c.Timeout = kv.DefaultTimeout
	if c.timeout != nil {
		if v := getenv("BATON_TIMEOUT"); v != "" && !c.timeout.IsSet() {
			if err := c.timeout.Set(v); err != nil {
				return Usagef("BATON_TIMEOUT: %v", err)
			}
		}
		c.Timeout = c.timeout.D
	}
	if c.Timeout <= 0 {
		return Usagef("--timeout %s: must be positive, e.g. 5s", c.Timeout)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return Usagef("--tls-cert and --tls-key go together")
	}
	return nil
}

// ParseDuration parses a flag's duration ("1.5s", "2m", "1h30m"); the error
// names the flag and the rule.
func ParseDuration(flag, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, Usagef("%s %q: not a duration; use a number with a unit, e.g. 30s, 5m, 1h", flag, s)
	}
	if d < 0 {
		return 0, Usagef("%s %s: must not be negative", flag, s)
	}
	return d, nil
}

// DurationFlag is a pflag.Value for a duration with the contract's rules:
// a unit is required and negative values are refused.
type DurationFlag struct {
	name string
	D    time.Duration
	set  bool
}

// NewDurationFlag returns a duration flag named name with a default.
func NewDurationFlag(name string, def time.Duration) *DurationFlag {
	return &DurationFlag{name: name, D: def}
}

func (f *DurationFlag) String() string {
	if f.D == 0 && !f.set {
		return ""
	}
	return f.D.String()
}

// Set parses a value.
func (f *DurationFlag) Set(s string) error {
	d, err := ParseDuration("--"+f.name, s)
	if err != nil {
		return err
	}
	f.D, f.set = d, true
	return nil
}

// Type names the value in help.
func (f *DurationFlag) Type() string { return "duration" }

// IsSet reports whether the flag was given.
func (f *DurationFlag) IsSet() bool { return f.set }

// Limits of --meta: a session record stays small.
const (
	MaxMetaPairs    = 64
	MaxMetaKeyLen   = 128
	MaxMetaValueLen = 1024
)

// ParseMeta parses the k=v pairs of --meta.
func ParseMeta(pairs []string) (map[string]string, error) { return ParsePairs("--meta", pairs) }

// ParsePairs parses the k=v pairs of flag (--meta, --label), with the
// limits of --meta.
func ParsePairs(flag string, pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	if len(pairs) > MaxMetaPairs {
		return nil, Usagef("%s given %d times: at most %d pairs", flag, len(pairs), MaxMetaPairs)
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		switch {
		case !ok || k == "":
			return nil, Usagef("%s %q: use KEY=VALUE with a non-empty key", flag, p)
		case len(k) > MaxMetaKeyLen || len(v) > MaxMetaValueLen:
			return nil, Usagef("%s %.20q...: keys are at most %d bytes, values at most %d", flag, p, MaxMetaKeyLen, MaxMetaValueLen)
		}
		m[k] = v
	}
	return m, nil
}

// ValidSlot checks a slot argument; the error is a usage error quoting the
// rule.
func ValidSlot(what, s string) error {
	if err := kv.ValidateKey(s); err != nil {
		return Usagef("%s %s", what, strings.TrimPrefix(err.Error(), "kv: invalid key: "))
	}
	return nil
}

// Describe a duration for people: whole seconds, or milliseconds under 10s.
func Describe(d time.Duration) string { return described(d).String() }

// described is d rounded as Describe shows it.
func described(d time.Duration) time.Duration {
	if d < 10*time.Second && d > -10*time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
