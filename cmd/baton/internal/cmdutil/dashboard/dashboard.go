// Package dashboard serves the web dashboard for `baton ui` and
// `baton up --ui`. It is apart from cmdutil because it links the dashboard
// (and client_golang), which the client program every verb starts in must
// not (ADR 0030): only the full program's verbs import it.
package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/web"
)

// TokenEnv is the environment variable that gives the dashboard's token.
const TokenEnv = "BATON_UI_TOKEN"

// Config is how to serve the dashboard.
type Config struct {
	Listen     string
	Token      string
	ReadOnly   bool
	StaleAfter time.Duration
}

// Serve serves the dashboard of m, ls, qs, ss, rl and rs on cfg.Listen until
// ctx is done, printing its address (with the token, to open once) on stdout and
// its log on stderr.
func Serve(ctx context.Context, f *cmdutil.Factory, cfg Config, m *session.Manager, ls *lease.Leases, qs *queue.Queues, ss *sem.Semaphores, rl *rate.Limiters, rs *reserve.Spaces) error {
	if err := web.CheckListen(cfg.Listen, cfg.Token, cfg.ReadOnly); err != nil {
		return cmdutil.Usagef("%v", err)
	}
	logger := slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := web.New(m, ls, qs, web.WithReadOnly(cfg.ReadOnly), web.WithToken(cfg.Token), web.WithLogger(logger),
		web.WithStaleAfter(cfg.StaleAfter), web.WithVersion(cmdutil.Version()), web.WithLimits(ss, rl), web.WithReservations(rs))
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
