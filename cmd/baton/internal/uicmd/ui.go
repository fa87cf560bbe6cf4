// Package uicmd is `baton ui`; the dashboard it serves, which `baton up --ui`
// serves too, is package dashboard.
package uicmd

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/cmdutil/dashboard"
	"github.com/batonhq/baton/queue"
)

// DefaultListen is where the dashboard listens unless told otherwise.
const DefaultListen = "127.0.0.1:7070"

// Options are ui's inputs.
type Options struct {
	F          *cmdutil.Factory
	Listen     string
	Token      string
	ReadOnly   bool
	StaleAfter *cmdutil.DurationFlag
}

// NewCmdUI returns `baton ui`; runF replaces the run for tests.
func NewCmdUI(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f, StaleAfter: cmdutil.NewDurationFlag("stale-after", 0)}
	cmd := &cobra.Command{
		Use:   "ui [--listen 127.0.0.1:7070]",
		Short: "Serve the web dashboard of a cluster: leaders, sessions, leases, queues, doctor, /metrics",
		Long: `Serve the dashboard of the cluster the global flags reach (the same server,
context, credentials and prefix as every verb): the servers and buckets,
every agent key with its leader badge and candidates ("Make leader" hands
leadership over with no gap, "Resign" steps down), the sessions (filtered,
sorted, a page at a time), leases, queues (cancel, retry, release) and the
doctor's findings with a safe "Fix". It updates live from KV watches.

It also serves the same data as JSON under /api/v1/ (the shapes of the CLI's
--json), Prometheus metrics of the whole cluster at /metrics, /healthz
(the process is up) and /readyz (connected, buckets present, watches read).

It listens on loopback unless told otherwise. Listening beyond loopback
needs --ui-token (or BATON_UI_TOKEN), which every request must carry
("Authorization: Bearer TOKEN", or the address printed at start, which sets
a cookie), or --read-only, which hides every action and makes the API refuse
them. Actions are POST only, refused from other sites, and logged on stderr.
(--token is the NATS server's token, as on every verb.)`,
		Example: `  baton ui
  baton ui --listen 0.0.0.0:7070 --ui-token "$(openssl rand -hex 16)"
  baton ui --listen 0.0.0.0:7070 --read-only
  curl -s localhost:7070/api/v1/agents | jq '.agents[] | {key, leader: .leader.holder}'`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("ui-token") {
				o.Token = f.Getenv(dashboard.TokenEnv)
			}
			if err := dashboard.CheckListen("--listen", o.Listen, o.Token, o.ReadOnly, "--ui-token", "--read-only"); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return uiRun(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Listen, "listen", DefaultListen, "address HOST:PORT to serve the dashboard on")
	fs.StringVar(&o.Token, "ui-token", "", "token every request must carry (env "+dashboard.TokenEnv+"); needed to listen beyond loopback unless --read-only")
	fs.BoolVar(&o.ReadOnly, "read-only", false, "show, never act: no buttons, and the API refuses actions (403)")
	fs.Var(o.StaleAfter, "stale-after", "call a session stale when not renewed for this long (default: half its TTL)")
	return cmd
}

func uiRun(ctx context.Context, o *Options) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	nopts := o.F.LongLived("ui", nil)
	m, err := o.F.Sessions(ctx, nopts...)
	if err != nil {
		return err
	}
	ls, err := o.F.Leases(ctx, "", nil, nopts...)
	if err != nil {
		return err
	}
	qs, err := queue.New(m)
	if err != nil {
		return err
	}
	ss, err := o.F.Semaphores(ctx, nil, nopts...)
	if err != nil {
		return err
	}
	rl, err := o.F.Limiters(ctx, nopts...)
	if err != nil {
		return err
	}
	rs, err := o.F.Spaces(ctx, nil, nopts...)
	if err != nil {
		return err
	}
	return dashboard.Serve(ctx, o.F, dashboard.Config{Listen: o.Listen, Token: o.Token, ReadOnly: o.ReadOnly, StaleAfter: o.StaleAfter.D}, m, ls, qs, ss, rl, rs)
}
