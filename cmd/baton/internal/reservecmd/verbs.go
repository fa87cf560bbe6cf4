package reservecmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/reserve"
)

func reserveRun(ctx context.Context, o *Options) error {
	switch o.Verb {
	case "reserve":
		return takeRun(ctx, o)
	case "renew":
		return renewRun(ctx, o)
	case "release":
		return releaseRun(ctx, o)
	case "run":
		return runRun(ctx, o)
	case "ls":
		return lsRun(ctx, o)
	default:
		return checkRun(ctx, o)
	}
}

// reserveOpts are the reservation options of reserve and run.
func reserveOpts(o *Options) ([]reserve.ReserveOption, error) {
	meta, err := cmdutil.ParseMeta(o.Meta)
	if err != nil {
		return nil, err
	}
	agent := o.Agent
	if agent == "" {
		agent = o.F.Getenv("BATON_AGENT")
	}
	opts := []reserve.ReserveOption{reserve.WithTTL(o.TTL.D), reserve.WithMeta(meta), reserve.WithAgent(agent), reserve.WithTask(o.Task)}
	if o.Shared {
		opts = append(opts, reserve.Shared())
	}
	return opts, nil
}

// take reserves, waiting up to --wait (run: without a bound unless --wait
// is given).
func take(ctx context.Context, o *Options, ss *reserve.Spaces, opts []reserve.ReserveOption) (*reserve.Reservation, error) {
	if o.Verb == "run" && !o.Wait.IsSet() {
		return ss.Reserve(ctx, o.Space, o.Patterns, opts...)
	}
	if o.Wait.D <= 0 {
		return ss.TryReserve(ctx, o.Space, o.Patterns, opts...)
	}
	wctx, cancel := context.WithTimeout(ctx, o.Wait.D)
	defer cancel()
	r, err := ss.Reserve(wctx, o.Space, o.Patterns, opts...)
	var held *reserve.HeldError
	if err != nil && errors.As(err, &held) && ctx.Err() == nil {
		return nil, fmt.Errorf("waited %s: %w", o.Wait.D, held)
	}
	return r, err
}

// doc is a reservation as reserve prints it with --json.
type doc struct {
	Space    string   `json:"space"`
	ID       string   `json:"id"`
	Patterns []string `json:"patterns"`
	Shared   bool     `json:"shared"`
	Fence    uint64   `json:"fence"`
	TTL      string   `json:"ttl"`
	Host     string   `json:"host"`
	PID      int      `json:"pid"`
	Agent    string   `json:"agent,omitempty"`
	Task     string   `json:"task,omitempty"`
}

func docOf(r *reserve.Reservation) doc {
	e := r.Entry()
	return doc{Space: r.Space(), ID: r.ID(), Patterns: e.Patterns, Shared: e.Shared, Fence: r.Fence(), TTL: r.TTL().String(),
		Host: e.Host, PID: e.PID, Agent: e.Agent, Task: e.Task}
}

func mode(shared bool) string {
	if shared {
		return "shared"
	}
	return "exclusive"
}

func takeRun(ctx context.Context, o *Options) error {
	opts, err := reserveOpts(o)
	if err != nil {
		return err
	}
	pid := o.PID
	if pid == 0 {
		pid = os.Getppid()
	}
	proc, err := hostlocal.LookupProcess(pid)
	if err != nil {
		return cmdutil.Usagef("--pid %d: no such process on this host", pid)
	}
	ss, err := o.F.Spaces(ctx, []reserve.Option{reserve.WithProcess(proc)})
	if err != nil {
		return err
	}
	r, err := take(ctx, o, ss, append(opts, reserve.WithoutKeepAlive()))
	if err != nil {
		return err
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, docOf(r))
	}
	cmdutil.Fprintf(o.F.IO.Out, "reserved %s: %s (%s), fence %d, ttl %s, id %s\n",
		r.Space(), strings.Join(r.Patterns(), " "), mode(r.Shared()), r.Fence(), r.TTL(), r.ID())
	cmdutil.Fprintf(o.F.IO.ErrOut, "release with: baton reserve release %s %s\n", r.Space(), r.ID())
	return nil
}

// ids are the reservations a verb acts on: its arguments, else
// BATON_RESERVATION's.
func ids(o *Options) ([]string, error) {
	if len(o.IDs) > 0 {
		return o.IDs, nil
	}
	env := strings.Fields(strings.ReplaceAll(o.F.Getenv("BATON_RESERVATION"), ",", " "))
	if len(env) == 0 {
		return nil, cmdutil.Usagef("name the reservations (their ids, as reserve printed them) or set BATON_RESERVATION")
	}
	return env, nil
}

func renewRun(ctx context.Context, o *Options) error {
	list, err := ids(o)
	if err != nil {
		return err
	}
	ss, err := o.F.Spaces(ctx, nil)
	if err != nil {
		return err
	}
	for _, id := range list {
		r, err := ss.Resume(ctx, o.Space, id)
		if err == nil {
			err = r.Renew(ctx)
		}
		if errors.Is(err, reserve.ErrNoReservation) {
			return cmdutil.Exit(cmdutil.ExitConflict, fmt.Errorf("%w; reserve the paths again", err))
		}
		if err != nil {
			return err
		}
		cmdutil.Fprintf(o.F.IO.Out, "renewed %s: %s, ttl %s\n", o.Space, id, r.TTL())
	}
	return nil
}

func releaseRun(ctx context.Context, o *Options) error {
	ss, err := o.F.Spaces(ctx, nil)
	if err != nil {
		return err
	}
	var list []string
	if o.Mine {
		lineage, err := hostlocal.Lineage(os.Getpid())
		if err != nil {
			return err
		}
		st, err := ss.Status(ctx, o.Space)
		if err != nil {
			return err
		}
		for _, r := range st.Reservations {
			if ss.OwnedBy(&r.Entry, lineage) {
				list = append(list, r.ID)
			}
		}
		if len(list) == 0 {
			cmdutil.Fprintf(o.F.IO.Out, "nothing to release: %s holds no reservation of this process or its ancestors on this host\n", o.Space)
			return nil
		}
	} else if list, err = ids(o); err != nil {
		return err
	}
	for _, id := range list {
		r, err := ss.Resume(ctx, o.Space, id)
		if err == nil {
			err = r.Release(ctx)
		}
		switch {
		case errors.Is(err, reserve.ErrNoReservation):
			cmdutil.Fprintf(o.F.IO.Out, "nothing to release: %s\n", cmdutil.Text(err))
		case err != nil:
			return err
		default:
			cmdutil.Fprintf(o.F.IO.Out, "released %s: %s (%s)\n", o.Space, strings.Join(r.Patterns(), " "), id)
		}
	}
	return nil
}

func runRun(ctx context.Context, o *Options) error {
	opts, err := reserveOpts(o)
	if err != nil {
		return err
	}
	command, err := o.F.LookCommand(o.Command)
	if err != nil {
		return err
	}
	ss, err := o.F.Spaces(ctx, nil, o.F.LongLived("reserve run", nil)...)
	if err != nil {
		return err
	}
	// From here on, SIGINT, SIGTERM and SIGHUP do not kill baton: before the
	// command starts they cancel the wait, after it they are passed to it.
	sigs, ctx := cmdutil.NotifySignals(ctx)
	defer sigs.Stop()
	r, err := take(ctx, o, ss, append(opts, reserve.WithGrace(o.Grace.D)))
	if err != nil {
		if sig, ok := sigs.Interrupted(); ok {
			return cmdutil.Exit(cmdutil.ExitCode(128+int(sig)), fmt.Errorf("interrupted by %s while waiting for %s; nothing was started", sig, o.Space))
		}
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*o.F.Config.Timeout)
		defer cancel()
		_ = r.Release(rctx)
	}()
	child, err := command.Start(
		"BATON_SPACE="+r.Space(),
		"BATON_RESERVATION="+r.ID(),
		"BATON_FENCE="+strconv.FormatUint(r.Fence(), 10))
	if err != nil {
		return err
	}
	sigs.Running(true)
	if sig, ok := sigs.Interrupted(); ok {
		_ = child.Signal(sig) // it came as the command started: pass it on
	}
	if cp, err := hostlocal.LookupProcess(child.PID()); err == nil {
		_ = r.SetChild(ctx, cp) // this host frees the paths only once the command is gone too
	}
	for {
		select {
		case <-child.Done():
			code, _ := child.Wait()
			_, _ = child.Stop(o.Grace.D) // whatever it left running
			if code != 0 {
				return cmdutil.Exit(cmdutil.ExitCode(code), nil)
			}
			return nil
		case <-r.Done():
			grace := min(o.Grace.D, o.TTL.D/4) // dead before another could be granted the paths
			code, _ := child.Stop(grace)
			return cmdutil.Exit(cmdutil.ExitConflict, fmt.Errorf("%w; stopped the command (exit %d)", r.Err(), code))
		case sig := <-sigs.Forward():
			if ss, ok := sig.(syscall.Signal); ok {
				_ = child.Signal(ss)
			}
		}
	}
}

func checkRun(ctx context.Context, o *Options) error {
	paths := o.Patterns
	if o.Stdin {
		more, err := readPaths(o.F.IO.In)
		if err != nil {
			return err
		}
		paths = append(paths, more...)
		if len(paths) == 0 {
			return nil // nothing staged: nothing to check
		}
	}
	ss, err := o.F.Spaces(ctx, nil)
	if err != nil {
		return err
	}
	opts := []reserve.CheckOption{reserve.AsLineageOf(os.Getpid())}
	if env := strings.Fields(strings.ReplaceAll(o.F.Getenv("BATON_RESERVATION"), ",", " ")); len(env) > 0 {
		opts = append(opts, reserve.Mine(env...))
	}
	if o.Shared {
		opts = append(opts, reserve.ForReading())
	}
	cs, err := ss.Check(ctx, o.Space, paths, opts...)
	if err != nil {
		return err
	}
	if o.F.Config.JSON {
		if err := cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"space": o.Space, "free": len(cs) == 0, "conflicts": orEmpty(cs)}); err != nil {
			return err
		}
	}
	if len(cs) == 0 {
		if !o.F.Config.JSON {
			cmdutil.Fprintf(o.F.IO.Out, "free: no one else holds %d path(s) of %s\n", len(paths), o.Space)
		}
		return nil
	}
	he := &reserve.HeldError{Space: o.Space, Conflicts: cs}
	return cmdutil.Exit(cmdutil.ExitConflict, fmt.Errorf("%s; wait for the holder to release them, or ask it to", strings.TrimSuffix(cmdutil.Text(he), "; nothing was reserved")))
}

func orEmpty(cs []reserve.Conflict) []reserve.Conflict {
	if cs == nil {
		return []reserve.Conflict{}
	}
	return cs
}

// readPaths reads paths one per line, or NUL-separated if any NUL is
// there; empty ones are dropped.
func readPaths(r io.Reader) ([]string, error) {
	data, err := io.ReadAll(bufio.NewReader(r))
	if err != nil {
		return nil, fmt.Errorf("read paths from standard input: %w", err)
	}
	sep := []byte{'\n'}
	if bytes.IndexByte(data, 0) >= 0 {
		sep = []byte{0}
	}
	var out []string
	for _, p := range bytes.Split(data, sep) {
		if p := strings.TrimRight(string(p), "\r"); p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// since is a duration for people, rounded.
func since(ms int64) string {
	return cmdutil.Describe(time.Duration(ms) * time.Millisecond)
}
