package semcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/sem"
)

func semRun(ctx context.Context, o *Options) error {
	switch o.Verb {
	case "create":
		return createRun(ctx, o)
	case "acquire":
		return acquireRun(ctx, o)
	case "release":
		return releaseRun(ctx, o)
	case "run":
		return runRun(ctx, o)
	case "status":
		return statusRun(ctx, o)
	default:
		return lsRun(ctx, o)
	}
}

func createRun(ctx context.Context, o *Options) error {
	if o.Max < 1 || o.Max > sem.MaxUnits {
		return cmdutil.Usagef("--max %d: a semaphore has 1 to %d units", o.Max, sem.MaxUnits)
	}
	ss, err := o.F.Semaphores(ctx, nil)
	if err != nil {
		return err
	}
	var opts []sem.CreateOption
	if o.PerHost {
		opts = append(opts, sem.PerHost())
	}
	c, err := ss.Create(ctx, o.Name, o.Max, opts...)
	if err != nil {
		return err
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, c)
	}
	each := ""
	if c.PerHost() {
		each = " on each host"
	}
	cmdutil.Fprintf(o.F.IO.Out, "semaphore %s: max %d%s\n", c.Name, c.Units(), each)
	return nil
}

// acquireOpts are the permit options of acquire and run.
func acquireOpts(o *Options) ([]sem.AcquireOption, error) {
	if o.Weight < 1 {
		return nil, cmdutil.Usagef("--weight %d: a permit holds at least 1 unit", o.Weight)
	}
	if err := kv.ValidateTTL(o.TTL.D); err != nil {
		return nil, cmdutil.Usagef("--ttl %s: a TTL is a whole number of seconds, at least 1s", o.TTL.D)
	}
	meta, err := cmdutil.ParseMeta(o.Meta)
	if err != nil {
		return nil, err
	}
	return []sem.AcquireOption{sem.WithWeight(o.Weight), sem.WithTTL(o.TTL.D), sem.WithMeta(meta)}, nil
}

// take acquires a permit, waiting up to --wait (run: without a bound
// unless --wait is given).
func take(ctx context.Context, o *Options, ss *sem.Semaphores, opts []sem.AcquireOption) (*sem.Permit, error) {
	if o.Verb == "run" && !o.Wait.IsSet() {
		return ss.Acquire(ctx, o.Name, opts...)
	}
	if o.Wait.D <= 0 {
		return ss.TryAcquire(ctx, o.Name, opts...)
	}
	wctx, cancel := context.WithTimeout(ctx, o.Wait.D)
	defer cancel()
	p, err := ss.Acquire(wctx, o.Name, opts...)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		var full *sem.FullError
		if errors.As(err, &full) {
			return nil, fmt.Errorf("waited %s: %w", o.Wait.D, full)
		}
	}
	return p, err
}

func acquireRun(ctx context.Context, o *Options) error {
	opts, err := acquireOpts(o)
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
	ss, err := o.F.Semaphores(ctx, []sem.Option{sem.WithProcess(proc)})
	if err != nil {
		return err
	}
	p, err := take(ctx, o, ss, append(opts, sem.WithoutKeepAlive()))
	if err != nil {
		return err
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, permitJSON(p))
	}
	cmdutil.Fprintf(o.F.IO.Out, "acquired %s: index %d, weight %d, fence %d, ttl %s, permit %s\n",
		p.Name(), p.Index(), p.Weight(), p.Fence(), p.TTL(), p.ID())
	cmdutil.Fprintf(o.F.IO.ErrOut, "release with: baton sem release %s --permit %s\n", p.Name(), p.ID())
	return nil
}

// permitDoc is a permit as acquire prints it with --json.
type permitDoc struct {
	Name   string `json:"name"`
	Permit string `json:"permit"`
	Index  int    `json:"index"`
	Weight int    `json:"weight"`
	Units  []int  `json:"units"`
	Fence  uint64 `json:"fence"`
	TTL    string `json:"ttl"`
	Host   string `json:"host"`
	PID    int    `json:"pid"`
}

func permitJSON(p *sem.Permit) permitDoc {
	h := p.Holder()
	return permitDoc{Name: p.Name(), Permit: p.ID(), Index: p.Index(), Weight: p.Weight(), Units: p.Units(),
		Fence: p.Fence(), TTL: p.TTL().String(), Host: h.Host, PID: h.PID}
}

func releaseRun(ctx context.Context, o *Options) error {
	id := o.Permit
	if id == "" {
		id = o.F.Getenv("BATON_PERMIT")
	}
	if id == "" {
		return cmdutil.Usagef("--permit is required (or BATON_PERMIT): the permit's id, as acquire printed it")
	}
	ss, err := o.F.Semaphores(ctx, nil)
	if err != nil {
		return err
	}
	detail := ""
	p, err := ss.Resume(ctx, o.Name, id)
	switch {
	case errors.Is(err, sem.ErrNoPermit):
		detail = "nothing to release: " + cmdutil.Text(err)
	case err != nil:
		return err
	default:
		err := p.Release(ctx)
		switch {
		case errors.Is(err, sem.ErrLost):
			detail = "released what was left of permit " + id + ": " + cmdutil.Text(err)
		case err != nil:
			return err
		default:
			detail = fmt.Sprintf("released %s: index %d, weight %d, permit %s", o.Name, p.Index(), p.Weight(), id)
		}
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"name": o.Name, "permit": id, "detail": detail})
	}
	cmdutil.Fprintf(o.F.IO.Out, "%s\n", detail)
	return nil
}

func runRun(ctx context.Context, o *Options) error {
	opts, err := acquireOpts(o)
	if err != nil {
		return err
	}
	command, err := o.F.LookCommand(o.Command)
	if err != nil {
		return err
	}
	ss, err := o.F.Semaphores(ctx, nil, o.F.LongLived("sem run", nil)...)
	if err != nil {
		return err
	}
	// From here on, SIGINT, SIGTERM and SIGHUP do not kill baton: before the
	// command starts they cancel the wait, after it they are passed to it.
	sigs, ctx := cmdutil.NotifySignals(ctx)
	defer sigs.Stop()
	p, err := take(ctx, o, ss, append(opts, sem.WithGrace(o.Grace.D)))
	if err != nil {
		if sig, ok := sigs.Interrupted(); ok {
			return cmdutil.Exit(cmdutil.ExitCode(128+int(sig)), fmt.Errorf("interrupted by %s while waiting for %s; nothing was started", sig, o.Name))
		}
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*o.F.Config.Timeout)
		defer cancel()
		_ = p.Release(rctx)
	}()
	units := make([]string, 0, p.Weight())
	for _, u := range p.Units() {
		units = append(units, strconv.Itoa(u))
	}
	child, err := command.Start(
		"BATON_SEM="+p.Name(),
		"BATON_SEM_INDEX="+strconv.Itoa(p.Index()),
		"BATON_SEM_UNITS="+strings.Join(units, ","),
		"BATON_PERMIT="+p.ID(),
		"BATON_FENCE="+strconv.FormatUint(p.Fence(), 10))
	if err != nil {
		return err
	}
	sigs.Running(true)
	if sig, ok := sigs.Interrupted(); ok {
		_ = child.Signal(sig) // it came as the command started: pass it on
	}
	if cp, err := hostlocal.LookupProcess(child.PID()); err == nil {
		_ = p.SetChild(ctx, cp) // this host frees the units only once the command is gone too
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
		case <-p.Done():
			grace := min(o.Grace.D, o.TTL.D/4) // dead before the server could free the units
			code, _ := child.Stop(grace)
			return cmdutil.Exit(cmdutil.ExitConflict, fmt.Errorf("%w; stopped the command (exit %d)", p.Err(), code))
		case sig := <-sigs.Forward():
			if ss, ok := sig.(syscall.Signal); ok {
				_ = child.Signal(ss)
			}
		}
	}
}

func statusRun(ctx context.Context, o *Options) error {
	var natsOpts []nats.Option
	if o.Watch {
		natsOpts = o.F.LongLived("sem status", nil)
	}
	ss, err := o.F.Semaphores(ctx, nil, natsOpts...)
	if err != nil {
		return err
	}
	st, err := ss.Status(ctx, o.Name)
	if err != nil {
		return err
	}
	if !o.Watch {
		return printStatus(o, st)
	}
	w, err := ss.Bucket().Watch(ctx, "sem."+o.Name+".>", kv.UpdatesOnly()) // units and the line
	if err != nil {
		return err
	}
	defer w.Stop()
	if err := printStatus(o, st); err != nil {
		return err
	}
	sigs, ctx := cmdutil.NotifySignals(ctx)
	defer sigs.Stop()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e == nil {
				continue
			}
			// A burst of changes (a weighted permit's units) is one print.
			drain(w, 20*time.Millisecond)
			if st, err = ss.Status(ctx, o.Name); err != nil {
				return err
			}
			if err := printStatus(o, st); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// drain takes the updates that come within d of each other.
func drain(w *kv.Watcher, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
			t.Reset(d)
		case <-t.C:
			return
		}
	}
}

func printStatus(o *Options, st sem.Status) error {
	if o.F.Config.JSON {
		if o.Watch {
			return cmdutil.PrintJSONLine(o.F.IO.Out, st)
		}
		return cmdutil.PrintJSON(o.F.IO.Out, st)
	}
	out := o.F.IO.Out
	where := ""
	if st.PerHost {
		where = " on " + st.Host + " (per host)"
	}
	cmdutil.Fprintf(out, "%s%s: %d of %d units held, %d free, %d waiting\n", st.Name, where, st.Held, st.Max, st.Free, len(st.Waiters))
	if len(st.Holders) == 0 && len(st.Waiters) == 0 {
		return nil
	}
	t := cmdutil.NewTable("INDEX", "WEIGHT", "UNITS", "HOST", "PID", "ACQUIRED", "RENEWED", "PERMIT")
	for _, h := range st.Holders {
		units := make([]string, len(h.Units))
		for i, u := range h.Units {
			units[i] = strconv.Itoa(u)
		}
		if h.Undecodable != "" {
			t.Row(strconv.Itoa(h.Index), "?", strings.Join(units, ","), "?", "?", "?", "?", "undecodable: "+h.Undecodable)
			continue
		}
		t.Row(strconv.Itoa(h.Index), strconv.Itoa(h.Weight), strings.Join(units, ","), h.Host, strconv.Itoa(h.PID),
			cmdutil.Since(h.AcquiredAt), cmdutil.Since(h.RenewedAt), h.Permit)
	}
	if len(st.Holders) > 0 {
		if _, err := t.WriteTo(out); err != nil {
			return err
		}
	}
	if len(st.Waiters) == 0 {
		return nil
	}
	cmdutil.Fprintf(out, "waiting, first first:\n")
	wt := cmdutil.NewTable("PLACE", "WEIGHT", "HOST", "PID", "SINCE", "WAITER")
	for i, w := range st.Waiters {
		wt.Row(strconv.Itoa(i+1), strconv.Itoa(w.Weight), w.Host, strconv.Itoa(w.PID), cmdutil.Since(w.Since), w.ID)
	}
	_, err := wt.WriteTo(out)
	return err
}

func lsRun(ctx context.Context, o *Options) error {
	ss, err := o.F.Semaphores(ctx, nil)
	if err != nil {
		return err
	}
	all, bad, err := ss.List(ctx)
	if err != nil {
		return err
	}
	if o.F.Config.JSON {
		return cmdutil.PrintJSON(o.F.IO.Out, map[string]any{"semaphores": all, "undecodable": bad})
	}
	if len(all) == 0 && bad == 0 {
		cmdutil.Fprintf(o.F.IO.Out, "no semaphores; make one with baton sem create NAME --max N\n")
		return nil
	}
	t := cmdutil.NewTable("NAME", "HOST", "MAX", "HELD", "FREE", "PERMITS", "WAITING")
	for _, st := range all {
		host := "(all)"
		if st.PerHost {
			host = st.Host
			if host == "" {
				host = "(each, none held)"
			}
		}
		t.Row(st.Name, host, strconv.Itoa(st.Max), strconv.Itoa(st.Held), strconv.Itoa(st.Free), strconv.Itoa(len(st.Holders)), strconv.Itoa(len(st.Waiters)))
	}
	if _, err := t.WriteTo(o.F.IO.Out); err != nil {
		return err
	}
	if bad > 0 {
		cmdutil.Fprintf(o.F.IO.ErrOut, "%d semaphore record(s) do not decode; run baton doctor\n", bad)
	}
	return nil
}
