package root_test

import (
	"bytes"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/closecmd"
	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/commitcmd"
	"github.com/batonhq/baton/cmd/baton/internal/doctorcmd"
	"github.com/batonhq/baton/cmd/baton/internal/full"
	"github.com/batonhq/baton/cmd/baton/internal/joincmd"
	"github.com/batonhq/baton/cmd/baton/internal/leadcmd"
	"github.com/batonhq/baton/cmd/baton/internal/leadercmd"
	"github.com/batonhq/baton/cmd/baton/internal/leasecmd"
	"github.com/batonhq/baton/cmd/baton/internal/mcpcmd"
	"github.com/batonhq/baton/cmd/baton/internal/queuecmd"
	"github.com/batonhq/baton/cmd/baton/internal/ratecmd"
	"github.com/batonhq/baton/cmd/baton/internal/reservecmd"
	"github.com/batonhq/baton/cmd/baton/internal/root"
	"github.com/batonhq/baton/cmd/baton/internal/runcmd"
	"github.com/batonhq/baton/cmd/baton/internal/semcmd"
	"github.com/batonhq/baton/cmd/baton/internal/statuscmd"
	"github.com/batonhq/baton/cmd/baton/internal/uicmd"
	"github.com/batonhq/baton/cmd/baton/internal/upcmd"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/web"
)

// stubbedRoot is the real command line with every verb's run replaced by a
// stub that only records what was parsed: parsing, the verbs' checks of
// their arguments and the global flags' resolution run as in baton; nothing
// connects, starts a server or runs a command.
type stubbedRoot struct {
	f      *cmdutil.Factory
	root   *cobra.Command
	out    *bytes.Buffer
	errOut *bytes.Buffer
	verb   string // the verb whose run was reached, "" if none
	opts   any    // its options
}

func newStubbedRoot() *stubbedRoot { return newStubbedRootFor("") }

// newStubbedRootFor is newStubbedRoot built as Main builds it for a
// command line whose first word is only.
func newStubbedRootFor(only string) *stubbedRoot {
	r := &stubbedRoot{out: &bytes.Buffer{}, errOut: &bytes.Buffer{}}
	r.f = &cmdutil.Factory{
		IO:     &cmdutil.IOStreams{In: strings.NewReader(""), Out: r.out, ErrOut: r.errOut},
		Getenv: func(string) string { return "" },
	}
	r.root = root.NewCmdRootStubbed(r.f, func(verb string, opts any) error {
		r.verb, r.opts = verb, opts
		return nil
	}, only, full.Verbs())
	r.root.InitDefaultHelpCmd()
	r.root.InitDefaultCompletionCmd()
	var noCompletion func(c *cobra.Command)
	noCompletion = func(c *cobra.Command) {
		c.ValidArgsFunction = nil // it would read the server's sessions
		for _, sub := range c.Commands() {
			noCompletion(sub)
		}
	}
	noCompletion(r.root)
	return r
}

// verbs are the root's commands, cobra's help and completion among them,
// sorted by name.
func verbs() []string {
	var names []string
	for _, c := range newStubbedRoot().root.Commands() {
		names = append(names, c.Name())
	}
	slices.Sort(names)
	return names
}

// commandLine is a seed of FuzzCommandLine: a verb, its arguments, and the
// run they reach ("" for none: help, or bad input).
type commandLine struct {
	verb string
	args []string
	runs string
}

func commandLines() []commandLine {
	return []commandLine{
		{"join", []string{"rendering", "--task", "T-42", "--agent", "claude-1", "--ttl", "90s", "--wait", "2s", "--meta", "k=v", "--force"}, "join"},
		{"join", []string{"rendering", "--task", "T", "--server", "nats://127.0.0.1:1", "--timeout", "200ms", "--prefix", "p_1", "--host-id", "h", "--json"}, "join"},
		{"join", []string{"rendering", "--ttl", "500ms"}, "join"}, // the run refuses it
		{"commit", []string{"rendering", "-m", "halfway", "--fence", "7"}, "commit"},
		{"close", []string{"rendering", "--result", "success", "--strict"}, "close"},
		{"run", []string{"lint", "--task", "T-44", "--grace", "1s", "--", "sh", "-c", "echo $BATON_SLOT"}, "run"},
		{"lead", []string{"chat-bot", "--ttl", "5s", "--min-term", "1m", "--score", "10", "--capability", "gpu", "--", "./bot"}, "lead"},
		{"leader", []string{"chat-bot", "--watch", "--require", "gpu"}, "leader show"},
		{"leader", []string{"transfer", "chat-bot", "--to", "bot-3", "--wait", "5s"}, "leader transfer"},
		{"lease", []string{"acquire", "deploy", "--ttl", "30s", "--wait", "10s", "--instance", "i-1", "--meta", "a=b"}, "lease"},
		{"lease", []string{"release", "deploy", "--instance", "i-1"}, "lease"},
		{"status", []string{"--watch", "--json", "--stale-after", "1m"}, "status"},
		{"doctor", []string{"--fix", "--state-dir", "/nonexistent/baton"}, "doctor"},
		{"up", []string{"--listen", "127.0.0.1:4222"}, "up"},
		{"queue", []string{"create", "agents", "--max-active", "4", "--timeout", "2h", "--ttl", "10s", "--slot-prefix", "q."}, "queue create"},
		{"queue", []string{"config", "agents", "--per-key", "2"}, "queue config"},
		{"queue", []string{"add", "agents", "--key", "alice", "--priority", "high", "--label", "p=1", "-"}, "queue add"},
		{"queue", []string{"work", "agents", "--concurrency", "2", "--once", "--wait", "1m", "--", "./agent.sh"}, "queue work"},
		{"queue", []string{"status", "agents", "--watch", "--by", "project"}, "queue status"},
		{"queue", []string{"get", "agents", "t-1", "--payload"}, "queue get"},
		{"queue", []string{"cancel", "agents", "t-1", "--wait", "0s"}, "queue cancel"},
		{"queue", []string{"retry", "agents", "t-1"}, "queue retry"},
		{"queue", []string{"release", "agents", "alice", "--force"}, "queue release"},
		{"queue", []string{"ls"}, "queue ls"},
		{"sem", []string{"create", "test-db", "--max", "3"}, "sem create"},
		{"sem", []string{"acquire", "gpu", "--weight", "2", "--wait", "5m", "--ttl", "10m", "--meta", "a=b", "--pid", "1"}, "sem acquire"},
		{"sem", []string{"release", "gpu", "--permit", "p-1"}, "sem release"},
		{"sem", []string{"run", "test-db", "--weight", "1", "--grace", "3s", "--", "go", "test"}, "sem run"},
		{"sem", []string{"status", "gpu", "--watch"}, "sem status"},
		{"sem", []string{"ls"}, "sem ls"},
		{"rate", []string{"create", "openai", "--takes", "50/1m", "--limit", "40000/1m+100", "--burst", "2"}, "rate create"},
		{"rate", []string{"take", "openai", "--cost", "1200", "--id", "req-7", "--wait", "30s"}, "rate take"},
		{"rate", []string{"settle", "openai", "--id", "req-7", "--cost", "950"}, "rate settle"},
		{"rate", []string{"status", "openai"}, "rate status"},
		{"rate", []string{"ls"}, "rate ls"},
		{"reserve", []string{"github.com/acme/app", "src/parser/**", "docs/api.md", "--shared", "--task", "T-1", "--agent", "a", "--ttl", "10m", "--wait", "5s", "--pid", "1", "--meta", "k=v"}, "reserve"},
		{"reserve", []string{"renew", "app", "r1"}, "reserve renew"},
		{"reserve", []string{"release", "app", "--mine"}, "reserve release"},
		{"reserve", []string{"run", "app", "src/**", "--grace", "2s", "--", "make"}, "reserve run"},
		{"reserve", []string{"ls", "app", "--watch"}, "reserve ls"},
		{"reserve", []string{"ls"}, "reserve ls"},
		{"reserve", []string{"check", "app", "src/a.go", "--stdin", "--shared"}, "reserve check"},
		{"lead", []string{"chat-bot", "--metrics", "127.0.0.1:0", "--", "./bot"}, "lead"},
		{"run", []string{"lint", "--task", "T", "--metrics", ":9464", "--", "true"}, "run"},
		{"queue", []string{"work", "agents", "--metrics", "[::1]:9464", "--", "./agent.sh"}, "queue work"},
		{"ui", nil, "ui"},
		{"mcp", nil, "mcp"},
		{"mcp", []string{"--server", "nats://127.0.0.1:1", "--prefix", "p_1", "--host-id", "h"}, "mcp"},
		{"ui", []string{"--listen", "0.0.0.0:7070", "--ui-token", "t0k", "--stale-after", "1m"}, "ui"},
		{"ui", []string{"--listen", "[::]:7070", "--read-only"}, "ui"},
		{"queue", nil, ""},
		{"help", []string{"join"}, ""},
		{"completion", []string{"bash"}, ""},
		{"lease", nil, ""},
		{"join", []string{"--help", "a..b"}, ""},
		// Bad input.
		{"join", []string{"a..b", "--task", "T"}, ""},
		{"join", []string{"rendering", "--ttl", "-1s"}, ""},
		{"join", []string{"rendering", "--ttl"}, ""},
		{"join", []string{"a", "b"}, ""},
		{"commit", []string{"rendering", "--timeout", "0s"}, ""},
		{"close", []string{"rendering", "--prefix", "a.b"}, ""},
		{"status", []string{"--tls-cert", "c.pem"}, ""},
		{"lead", []string{"chat-bot", "./bot"}, ""},
		{"lease", []string{"grab", "deploy"}, ""},
		{"leader", []string{"transfer", "chat-bot"}, ""},
		{"leader", []string{"--nope"}, ""},
		{"doctor", []string{"-", "--=x", "-m"}, ""},
		{"run", []string{"slot\nwith a newline", "--task", "T", "--", "true"}, ""},
		{"queue", []string{"create", "a.b"}, ""},
		{"queue", []string{"work", "agents", "./agent.sh"}, ""},
		{"queue", []string{"get", "agents"}, ""},
		{"queue", []string{"release", "agents", "a..b"}, ""},
		{"queue", []string{"add", "agents", "x"}, ""},
		{"queue", []string{"create", "agents", "--timeout", "soon"}, ""},
		{"queue", []string{"shuffle", "agents"}, ""},
		{"sem", []string{"create", "db"}, ""},
		{"sem", []string{"create", "db", "--max", "0"}, ""},
		{"sem", []string{"acquire", "a.b"}, ""},
		{"sem", []string{"acquire", "db", "--ttl", "500ms"}, ""},
		{"sem", []string{"run", "db", "true"}, ""},
		{"reserve", []string{"app"}, ""},
		{"reserve", []string{"app", "/etc"}, ""},
		{"reserve", []string{"app", "a/../b"}, ""},
		{"reserve", []string{"app", "src/**", "--ttl", "500ms"}, ""},
		{"reserve", []string{"has space", "src"}, ""},
		{"reserve", []string{"run", "app", "--", "true"}, ""},
		{"reserve", []string{"run", "app", "src"}, ""},
		{"reserve", []string{"release", "app", "r1", "--mine"}, ""},
		{"reserve", []string{"check", "app"}, ""},
		{"reserve", []string{"ls", "--watch"}, ""},
		{"rate", []string{"create", "api", "--limit", "5/xx"}, ""},
		{"rate", []string{"create", "api"}, ""},
		{"rate", []string{"take", "api", "--cost", "-1"}, ""},
		{"rate", []string{"settle", "api", "--id", "x"}, ""},
		{"lead", []string{"chat-bot", "--metrics", "9464", "--", "./bot"}, ""},
		{"run", []string{"lint", "--task", "T", "--metrics", "h:http", "--", "true"}, ""},
		{"queue", []string{"work", "agents", "--metrics", "h:70000", "--", "./agent.sh"}, ""},
		{"ui", []string{"--listen", "0.0.0.0:7070"}, ""},
		{"ui", []string{"--listen", "nohost"}, ""},
		{"ui", []string{"extra"}, ""},
		{"mcp", []string{"extra"}, ""},
	}
}

// TestCommandLine_Seeds pins what each seed of FuzzCommandLine reaches.
func TestCommandLine_Seeds(t *testing.T) {
	for _, cl := range commandLines() {
		args := append([]string{cl.verb}, cl.args...)
		r := newStubbedRoot()
		code := root.Execute(t.Context(), r.f, r.root, args)
		want := cmdutil.ExitOK
		if cl.runs == "" && cl.verb != "help" && cl.verb != "completion" && !slices.Contains(args, "--help") && cl.args != nil {
			want = cmdutil.ExitUsage
		}
		if code != want || r.verb != cl.runs {
			t.Errorf("baton %q: exit %d, reached %q; want exit %d, %q (stderr %q)", args, code, r.verb, want, cl.runs, r.errOut)
		}
	}
}

// FuzzCommandLine runs the real command line on a verb and arguments (the
// input, split at NUL bytes, as the OS would give them) with every verb's
// run stubbed out. Parsing never panics. It reaches a verb's run; or shows
// help, when asked for it (help, completion, --help, a verb group alone);
// or ends with exit 2 (bad input) through the one exit-code mapping, with
// one line on stderr in the contract's form. A run is reached only with
// valid values: no negative duration, a positive --timeout, a valid prefix,
// SLOT and KEY valid keys, and join's --ttl (if the run takes it) whole
// seconds, at least 1s.
func FuzzCommandLine(f *testing.F) {
	names := verbs()
	for _, cl := range commandLines() {
		i := slices.Index(names, cl.verb)
		if i < 0 {
			f.Fatalf("no verb %q among %q", cl.verb, names)
		}
		f.Add(uint8(i), strings.Join(cl.args, "\x00"))
	}
	f.Fuzz(func(t *testing.T, v uint8, line string) {
		args := []string{names[int(v)%len(names)]}
		if line != "" {
			args = append(args, strings.Split(line, "\x00")...)
		}
		r := newStubbedRoot()
		code := root.Execute(t.Context(), r.f, r.root, args)
		stderr := r.errOut.String()

		// Main builds only the verb named: the outcome is the same.
		one := newStubbedRootFor(args[0])
		if c := root.Execute(t.Context(), one.f, one.root, args); c != code || one.verb != r.verb || one.out.String() != r.out.String() || one.errOut.String() != stderr {
			t.Fatalf("baton %q: with every verb built, exit %d, run %q, stdout %.200q, stderr %q; with %s alone, exit %d, run %q, stdout %.200q, stderr %q",
				args, code, r.verb, r.out, stderr, args[0], c, one.verb, one.out, one.errOut)
		}

		switch {
		case code == cmdutil.ExitUsage:
			if r.verb != "" {
				t.Fatalf("baton %q: exit 2 after the run of %s was reached", args, r.verb)
			}
			if !strings.HasPrefix(stderr, "baton: ") || !strings.HasSuffix(stderr, "\n") || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("baton %q: stderr %q is not one error line", args, stderr)
			}
		case code != cmdutil.ExitOK:
			t.Fatalf("baton %q: exit %d, want 0 or %d (bad input); stderr %q", args, code, cmdutil.ExitUsage, stderr)
		case stderr != "":
			t.Fatalf("baton %q: exit 0 with stderr %q", args, stderr)
		case r.verb == "":
			if !askedForHelp(r.root, args) {
				t.Fatalf("baton %q: exit 0 without a run, and no help was asked for; stdout %.80q", args, r.out)
			}
		default:
			checkParsed(t, args, r)
		}
	})
}

// validQueue fails unless name is a queue name that makes a valid subject
// token.
func validQueue(t *testing.T, args []string, name string) {
	t.Helper()
	if queue.ValidateName(name) != nil || !kvtest.NATSKeyValid(name+".config") {
		t.Fatalf("baton %q: queue %q is not a valid name", args, name)
	}
}

// askedForHelp reports whether args ask for help rather than a run: the
// help or completion verb, --help, or a verb group with no verb of it.
func askedForHelp(root *cobra.Command, args []string) bool {
	if args[0] == "help" || args[0] == "completion" {
		return true
	}
	cmd, _, err := root.Find(args)
	if err != nil {
		return false
	}
	if h := cmd.Flags().Lookup("help"); h != nil && h.Changed {
		return true
	}
	return cmd.HasSubCommands() && cmd.Flags().NArg() == 0
}

// checkParsed checks the options a command line reached a run with.
func checkParsed(t *testing.T, args []string, r *stubbedRoot) {
	t.Helper()
	c := r.f.Config
	if c.Timeout <= 0 || session.ValidatePrefix(c.Prefix) != nil || !kvtest.NATSBucketValid(session.BucketConfig(c.Prefix, 0).Name) {
		t.Fatalf("baton %q: timeout %v, prefix %q", args, c.Timeout, c.Prefix)
	}
	validKey := func(what, k string) {
		if !kvtest.NATSKeyValid(k) || strings.Contains(k, "/") || len(k) > kv.MaxKeyLen {
			t.Fatalf("baton %q: %s %q is not a valid key", args, what, k)
		}
	}
	metricsAddr := func(addr string) {
		if addr == "" {
			return
		}
		_, port, err := net.SplitHostPort(addr)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
			t.Fatalf("baton %q: --metrics %q is not HOST:PORT", args, addr)
		}
	}
	durations := func(ds ...*cmdutil.DurationFlag) {
		for _, d := range ds {
			if d.D < 0 {
				t.Fatalf("baton %q: a duration flag is %v", args, d.D)
			}
		}
	}
	joinFlags := func(fl *cmdutil.JoinFlags) {
		durations(fl.TTL, fl.Wait)
		if _, err := fl.JoinOptions(); err != nil {
			if cmdutil.Code(err) != cmdutil.ExitUsage {
				t.Fatalf("baton %q: join options: %v is not bad input", args, err)
			}
		} else if fl.TTL.D < time.Second || fl.TTL.D%time.Second != 0 || fl.Task == "" {
			t.Fatalf("baton %q: join options taken with --ttl %v, --task %q", args, fl.TTL.D, fl.Task)
		}
	}
	switch o := r.opts.(type) {
	case *joincmd.Options:
		validKey("slot", o.Slot)
		joinFlags(o.Flags)
	case *runcmd.Options:
		validKey("slot", o.Slot)
		metricsAddr(o.Metrics)
		joinFlags(o.Flags)
		durations(o.Grace)
		if len(o.Command) == 0 {
			t.Fatalf("baton %q: run without a command", args)
		}
	case *commitcmd.Options:
		validKey("slot", o.Slot)
	case *closecmd.Options:
		validKey("slot", o.Slot)
	case *leadcmd.Options:
		validKey("key", o.Key)
		metricsAddr(o.Metrics)
		durations(o.TTL, o.MinTerm, o.Grace)
		if len(o.Command) == 0 {
			t.Fatalf("baton %q: lead without a command", args)
		}
	case *leadercmd.Options:
		validKey("key", o.Key)
		if o.Wait != nil {
			durations(o.Wait)
		}
		if r.verb == "leader transfer" && o.To == "" {
			t.Fatalf("baton %q: transfer to nobody", args)
		}
	case *leasecmd.Options:
		validKey("key", o.Key)
		durations(o.TTL, o.Wait)
		if !slices.Contains([]string{"acquire", "renew", "release", "get"}, o.Verb) {
			t.Fatalf("baton %q: lease verb %q", args, o.Verb)
		}
	case *statuscmd.Options:
		durations(o.StaleAfter)
	case *doctorcmd.Options:
		durations(o.StaleAfter)
	case *mcpcmd.Options:
		// No arguments of its own: the global flags, checked above.
	case *queuecmd.CreateOptions:
		validQueue(t, args, o.Queue)
		durations(o.Config.Timeout, o.Config.TTL, o.Config.Backoff, o.Config.Retention)
	case *queuecmd.AddOptions:
		validQueue(t, args, o.Queue)
	case *queuecmd.WorkOptions:
		validQueue(t, args, o.Queue)
		metricsAddr(o.Metrics)
		durations(o.Wait, o.Grace)
		if len(o.Command) == 0 {
			t.Fatalf("baton %q: queue work without a command", args)
		}
	case *queuecmd.StatusOptions:
		validQueue(t, args, o.Queue)
	case *queuecmd.TaskOptions:
		validQueue(t, args, o.Queue)
		validKey("task id", o.ID)
		if o.Wait != nil {
			durations(o.Wait)
		}
	case *queuecmd.ReleaseOptions:
		validQueue(t, args, o.Queue)
		validKey("key", o.Key)
	case *queuecmd.LsOptions:
	case *semcmd.Options:
		if o.Verb != "ls" && sem.ValidName(o.Name) != nil {
			t.Fatalf("baton %q: sem %s of the name %q", args, o.Verb, o.Name)
		}
		durations(o.TTL, o.Wait, o.Grace)
		switch o.Verb {
		case "create":
			if o.Max < 1 || o.Max > sem.MaxUnits {
				t.Fatalf("baton %q: sem create with max %d", args, o.Max)
			}
		case "acquire", "run":
			if o.Weight < 1 || kv.ValidateTTL(o.TTL.D) != nil {
				t.Fatalf("baton %q: sem %s with weight %d, ttl %v", args, o.Verb, o.Weight, o.TTL.D)
			}
			if o.Verb == "run" && len(o.Command) == 0 {
				t.Fatalf("baton %q: sem run without a command", args)
			}
		case "release", "status", "ls":
		default:
			t.Fatalf("baton %q: sem verb %q", args, o.Verb)
		}
	case *ratecmd.Options:
		if o.Verb != "ls" && rate.ValidName(o.Name) != nil {
			t.Fatalf("baton %q: rate %s of the name %q", args, o.Verb, o.Name)
		}
		durations(o.Wait)
		switch o.Verb {
		case "create":
			if len(o.Parsed) == 0 {
				t.Fatalf("baton %q: rate create without limits", args)
			}
		case "take", "settle":
			if o.Cost < 0 || o.Verb == "settle" && o.ID == "" {
				t.Fatalf("baton %q: rate %s with cost %d, id %q", args, o.Verb, o.Cost, o.ID)
			}
		case "status", "ls":
		default:
			t.Fatalf("baton %q: rate verb %q", args, o.Verb)
		}
	case *reservecmd.Options:
		if o.Space != "" && reserve.ValidSpace(o.Space) != nil || o.Space == "" && o.Verb != "ls" {
			t.Fatalf("baton %q: reserve %s of the space %q", args, o.Verb, o.Space)
		}
		durations(o.TTL, o.Wait, o.Grace)
		switch o.Verb {
		case "reserve", "run":
			if _, err := reserve.ParsePatterns(o.Patterns); err != nil || kv.ValidateTTL(o.TTL.D) != nil {
				t.Fatalf("baton %q: reserve %s with patterns %q, ttl %v", args, o.Verb, o.Patterns, o.TTL.D)
			}
			if o.Verb == "run" && len(o.Command) == 0 {
				t.Fatalf("baton %q: reserve run without a command", args)
			}
		case "check":
			if len(o.Patterns) == 0 && !o.Stdin {
				t.Fatalf("baton %q: reserve check of no path", args)
			}
		case "release":
			if o.Mine && len(o.IDs) > 0 {
				t.Fatalf("baton %q: release --mine with ids", args)
			}
		case "renew", "ls":
		default:
			t.Fatalf("baton %q: reserve verb %q", args, o.Verb)
		}
	case *uicmd.Options:
		durations(o.StaleAfter)
		if err := web.CheckListen(o.Listen, o.Token, o.ReadOnly); err != nil {
			t.Fatalf("baton %q: ui reached its run with --listen %q: %v", args, o.Listen, err)
		}
	case *upcmd.Options, []string: // up's own checks run in its run; __supervise takes anything
	default:
		t.Fatalf("baton %q: %s ran with options %T", args, r.verb, r.opts)
	}
}

// The root's own errors (an unknown verb, a bad global flag) name baton
// once, and cobra's suggestion reads as part of the one line.
func TestRootErrors_NameBatonOnce(t *testing.T) {
	for args, want := range map[string]string{
		"frobnicate": `baton: unknown command "frobnicate"; see --help` + "\n",
		"joni":       `baton: unknown command "joni" (did you mean join?); see --help` + "\n",
		"--bogus":    "baton: unknown flag: --bogus; see --help\n",
	} {
		r := newStubbedRoot()
		code := root.Execute(t.Context(), r.f, r.root, strings.Fields(args))
		if code != cmdutil.ExitUsage || r.errOut.String() != want {
			t.Errorf("baton %s: exit %d, stderr %q; want exit 2, %q", args, code, r.errOut, want)
		}
	}
}
