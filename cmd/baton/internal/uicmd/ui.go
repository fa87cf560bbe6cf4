// Package uicmd is `baton ui`, and the dashboard `baton up --ui` serves.
package uicmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/web"
)

// DefaultListen is where the dashboard listens unless told otherwise.
const DefaultListen = "127.0.0.1:7070"

// TokenEnv is the environment variable that gives the dashboard's token.
const TokenEnv = "BATON_UI_TOKEN"

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
				o.Token = f.Getenv(TokenEnv)
			}
			if err := CheckListen("--listen", o.Listen, o.Token, o.ReadOnly, "--ui-token", "--read-only"); err != nil {
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
	fs.StringVar(&o.Token, "ui-token", "", "token every request must carry (env "+TokenEnv+"); needed to listen beyond loopback unless --read-only")
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
	return Serve(ctx, o.F, Config{Listen: o.Listen, Token: o.Token, ReadOnly: o.ReadOnly, StaleAfter: o.StaleAfter.D}, m, ls, qs)
}

// Config is how to serve the dashboard.
type Config struct {
	Listen     string
	Token      string
	ReadOnly   bool
	StaleAfter time.Duration
}

// Serve serves the dashboard of m, ls and qs on cfg.Listen until ctx is
// done, printing its address (with the token, to open once) on stdout and
// its log on stderr.
func Serve(ctx context.Context, f *cmdutil.Factory, cfg Config, m *session.Manager, ls *lease.Leases, qs *queue.Queues) error {
	if err := web.CheckListen(cfg.Listen, cfg.Token, cfg.ReadOnly); err != nil {
		return cmdutil.Usagef("%v", err)
	}
	logger := slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := web.New(m, ls, qs, web.WithReadOnly(cfg.ReadOnly), web.WithToken(cfg.Token), web.WithLogger(logger),
		web.WithStaleAfter(cfg.StaleAfter), web.WithVersion(cmdutil.Version()))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return cmdutil.Exit(cmdutil.ExitConflict, fmt.Errorf("cannot listen on %s: %w; pick another --listen address", cfg.Listen, err))
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Run(runCtx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	addr := "http://" + ln.Addr().String() + "/"
	shown := addr
	if cfg.Token != "" {
		shown += "?token=" + url.QueryEscape(cfg.Token)
	}
	mode := ""
	if cfg.ReadOnly {
		mode = " (read-only)"
	}
	if f.Config.JSON {
		_ = cmdutil.PrintJSON(f.IO.Out, map[string]any{"url": addr, "open": shown, "read_only": cfg.ReadOnly})
	} else {
		cmdutil.Fprintf(f.IO.Out, "baton ui: serving the dashboard of %s at %s%s; Ctrl-C to stop\n", m.Bucket().Client().URL(), shown, mode)
	}
	var err2 error
	select {
	case <-ctx.Done():
	case err2 = <-serveErr:
	}
	// Close, not Shutdown: event streams never go idle, so a graceful
	// shutdown would only wait for them.
	_ = hs.Close()
	cancel()
	<-done
	if err2 != nil && !errors.Is(err2, http.ErrServerClosed) {
		return err2
	}
	return nil
}

// CheckListen refuses a dashboard address beyond loopback with neither a
// token nor read-only mode, naming the flags that allow it (exit 2).
func CheckListen(flag, addr, token string, readOnly bool, tokenFlag, readOnlyFlag string) error {
	err := web.CheckListen(addr, token, readOnly)
	if errors.Is(err, web.ErrUnsafeListen) {
		return cmdutil.Usagef("%s %s: anyone who can reach it could act on the cluster; pass %s TOKEN (or %s), or %s, or listen on 127.0.0.1", flag, addr, tokenFlag, TokenEnv, readOnlyFlag)
	}
	if err != nil {
		return cmdutil.Usagef("%s: %v", flag, err)
	}
	return nil
}
