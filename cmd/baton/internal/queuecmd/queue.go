// Package queuecmd is `baton queue`: per-key work queues.
package queuecmd

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/queue"
)

// Verbs replaces the run of each queue verb for tests: it gets the verb
// ("create", "add", ...) and its options once the command line is parsed.
type Verbs func(verb string, opts any) error

// NewCmdQueue returns `baton queue` and its verbs; runF replaces their runs
// for tests.
func NewCmdQueue(f *cmdutil.Factory, runF Verbs) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue <create|config|add|work|status|get|cancel|retry|release|pause|resume|key|schedule|ls>",
		Short: "Per-key work queues: one task per key at a time, fair across keys, capacity-bounded",
		Long: `A queue holds tasks, each for a key (a user, a project). Workers on any host run
them: at most per_key tasks of one key at a time (each under the key's lock:
the session of the slot named by the key, so baton run and baton join on
that slot and the queue's tasks exclude each other), at most max_active at
once across every worker, the highest priority first and, among keys of one
priority, the key served least recently first; tasks of one key run in the
order they were added.

A worker that dies loses its task to another worker: at once on its own
host, within the queue's TTL elsewhere; the task runs again with its
attempt counted and a larger fence, and after max_attempts it is dead. A
task that fails runs again after the queue's backoff. The queue's settings
are one record that every worker reads: change them with baton queue config.

Tasks are pending, active, done, failed (waiting for a retry), dead (out of
attempts) or cancelled.`,
		Example: `  baton queue create agents --max-active 4
  baton queue add agents --key alice --payload "fix issue 12"
  baton queue work agents --concurrency 2 -- ./agent.sh
  baton queue status agents`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.Usagef("unknown verb %q for baton queue: use create, config, add, work, status, get, cancel, retry, release, pause, resume, key, schedule or ls", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newCmdCreate(f, runF), newCmdConfig(f, runF), newCmdAdd(f, runF), newCmdWork(f, runF),
		newCmdStatus(f, runF), newCmdGet(f, runF), newCmdCancel(f, runF), newCmdRetry(f, runF),
		newCmdRelease(f, runF), newCmdPause(f, runF, true), newCmdPause(f, runF, false), newCmdKey(f, runF), newCmdSchedule(f, runF), newCmdLs(f, runF),
	)
	return cmd
}

// queueArg checks that args start with a valid queue name, followed by
// want more arguments named in usage.
func queueArgs(usage string, more int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1+more {
			return cmdutil.Usagef("want %s", usage)
		}
		if err := queue.ValidateName(args[0]); err != nil {
			return cmdutil.Usagef("%s", cmdutil.Text(err))
		}
		return nil
	}
}

// ConfigFlags are the settings of create and config.
type ConfigFlags struct {
	MaxActive   int
	PerKey      int
	MaxAttempts int
	Timeout     *cmdutil.DurationFlag
	TTL         *cmdutil.DurationFlag
	SlotPrefix  string
	Backoff     *cmdutil.DurationFlag
	Retention   *cmdutil.DurationFlag
	Rate        string
	KeyRate     string

	fs *pflag.FlagSet
}

func addConfigFlags(cmd *cobra.Command) *ConfigFlags {
	d := queue.DefaultConfig("x")
	c := &ConfigFlags{
		Timeout:   cmdutil.NewDurationFlag("timeout", time.Duration(d.Timeout)),
		TTL:       cmdutil.NewDurationFlag("ttl", time.Duration(d.TTL)),
		Backoff:   cmdutil.NewDurationFlag("backoff", time.Duration(d.Backoff)),
		Retention: cmdutil.NewDurationFlag("retention", time.Duration(d.Retention)),
		fs:        cmd.Flags(),
	}
	fs := cmd.Flags()
	fs.IntVar(&c.MaxActive, "max-active", 0, "tasks running at once across every worker and host (0: no limit)")
	fs.IntVar(&c.PerKey, "per-key", d.PerKey, "tasks of one key running at once")
	fs.IntVar(&c.MaxAttempts, "max-attempts", d.MaxAttempts, "attempts before a task is dead")
	fs.Var(c.Timeout, "timeout", "longest a task may run before it is stopped and failed (here the task's; the per-call timeout comes from BATON_TIMEOUT)")
	fs.Var(c.TTL, "ttl", "TTL of key locks and capacity tokens: a dead worker's task is noticed within it on other hosts (whole seconds)")
	fs.StringVar(&c.SlotPrefix, "slot-prefix", "", "put before a key to name its lock's slot")
	fs.Var(c.Backoff, "backoff", "wait before a failed task runs again, doubled per attempt (0: at once)")
	fs.Var(c.Retention, "retention", "how long a finished task stays readable (whole seconds)")
	fs.StringVar(&c.Rate, "rate", "none", "at most N starts in any window of PERIOD, by the server's clock: N/PERIOD (20/1s, 50/1m, 1000/h) or none")
	fs.StringVar(&c.KeyRate, "key-rate", "none", "the same for each key on its own, unless the key has a rate of its own (baton queue key set --rate): N/PERIOD or none")
	return c
}

// apply sets on cfg the flags that were given (all of them for a new
// queue, whose cfg holds the defaults).
func (c *ConfigFlags) apply(cfg *queue.Config) error {
	set := func(name string) bool { return c.fs.Changed(name) }
	if set("rate") {
		r, err := queue.ParseRate(c.Rate)
		if err != nil {
			return cmdutil.Usagef("--rate: %s", cmdutil.Text(err))
		}
		cfg.Rate = r
	}
	if set("key-rate") {
		r, err := queue.ParseRate(c.KeyRate)
		if err != nil {
			return cmdutil.Usagef("--key-rate: %s", cmdutil.Text(err))
		}
		cfg.KeyRate = r
	}
	if set("max-active") {
		cfg.MaxActive = c.MaxActive
	}
	if set("per-key") {
		cfg.PerKey = c.PerKey
	}
	if set("max-attempts") {
		cfg.MaxAttempts = c.MaxAttempts
	}
	if set("timeout") {
		cfg.Timeout = queue.Duration(c.Timeout.D)
	}
	if set("ttl") {
		cfg.TTL = queue.Duration(c.TTL.D)
	}
	if set("slot-prefix") {
		cfg.SlotPrefix = c.SlotPrefix
	}
	if set("backoff") {
		cfg.Backoff = queue.Duration(c.Backoff.D)
	}
	if set("retention") {
		cfg.Retention = queue.Duration(c.Retention.D)
	}
	return nil
}

// changed reports whether any setting was given.
func (c *ConfigFlags) changed() bool {
	for _, n := range []string{"max-active", "per-key", "max-attempts", "timeout", "ttl", "slot-prefix", "backoff", "retention", "rate", "key-rate"} {
		if c.fs.Changed(n) {
			return true
		}
	}
	return false
}

// printConfig writes a queue's settings for people.
func printConfig(w io.Writer, c queue.Config) {
	max := "no limit"
	if c.MaxActive > 0 {
		max = fmt.Sprint(c.MaxActive)
	}
	prefix := c.SlotPrefix
	if prefix == "" {
		prefix = "(none: a key's lock is the slot named by the key)"
	}
	cmdutil.Fprintf(w, "queue         %s\nmax_active    %s\nper_key       %d\nmax_attempts  %d\ntimeout       %s\nttl           %s\nslot_prefix   %s\nbackoff       %s\nretention     %s\nrate          %s\nkey_rate      %s\n",
		c.Queue, max, c.PerKey, c.MaxAttempts, c.Timeout, c.TTL, prefix, c.Backoff, c.Retention, c.Rate, c.KeyRate)
}

// describeEnd says how a task's last attempt ended, for people.
func describeEnd(r *queue.Result) string {
	if r == nil {
		return ""
	}
	var parts []string
	switch {
	case r.Reason == queue.ReasonExit && r.ExitCode != nil:
		parts = append(parts, fmt.Sprintf("exit %d", *r.ExitCode))
	default:
		parts = append(parts, r.Reason)
	}
	if !r.StartedAt.IsZero() && !r.EndedAt.IsZero() && r.EndedAt.After(r.StartedAt) {
		parts = append(parts, "after "+cmdutil.Describe(r.EndedAt.Sub(r.StartedAt)))
	}
	if r.Host != "" {
		parts = append(parts, fmt.Sprintf("on host %s pid %d", r.Host, r.PID))
	}
	if r.Fence != 0 {
		parts = append(parts, fmt.Sprintf("fence %d", r.Fence))
	}
	s := strings.Join(parts, ", ")
	if r.Error != "" && r.Reason != queue.ReasonExit {
		s += ": " + r.Error
	}
	return s
}
