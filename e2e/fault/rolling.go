package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/session"
)

// rollTTL is the TTL of every holder during the rolling restart: shorter
// than a stream leader election after a SIGKILL (6-8 s), so a restart that
// paused writes for that long would lose them all.
const rollTTL = 2 * time.Second

// rollResult is what the rolling restart showed.
type rollResult struct {
	restarts    int
	took        time.Duration
	slowestExit time.Duration
	unclean     int             // servers that did not exit within 30 s of SIGTERM
	pause       time.Duration   // longest time without an acknowledged probe write
	pauses      []time.Duration // per restart
	holders     int
	lost        []string
}

// probe writes through the library as fast as it is answered (every 50 ms)
// and keeps the times of its acknowledged writes.
type probe struct {
	name string
	mu   sync.Mutex
	acks []time.Time
	lost error
}

func (p *probe) ack(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acks = append(p.acks, t)
}

// gap is the longest time in [from, to] without an acknowledged write.
func (p *probe) gap(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, gap := from, time.Duration(0)
	for _, t := range p.acks {
		if t.Before(from) || t.After(to) {
			continue
		}
		gap = max(gap, t.Sub(prev))
		prev = t
	}
	return max(gap, to.Sub(prev))
}

// rollingRestart restarts the three servers one by one with SIGTERM, as an
// upgrade would, while `baton run` and `baton lead` on two hosts and library
// probes on the sessions and leases buckets hold at TTL 2 s. No holder may
// lose what it holds; the longest write pause is reported.
func (h *harness) rollingRestart(ctx context.Context) (rollResult, error) {
	var res rollResult
	tr, err := h.tr.tracer("lib-roll")
	if err != nil {
		return res, err
	}
	c, err := kv.Connect(ctx, kv.WithURL(h.cl.urls()), kv.WithTimeout(rollTTL), kv.WithName("batonfault roll"), kv.WithTracer(tr))
	if err != nil {
		return res, err
	}
	defer c.Close()
	pctx, stopProbes := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopProbes(); wg.Wait() }()
	sp, lp := &probe{name: "session probe"}, &probe{name: "lease probe"}
	if err := h.startProbes(pctx, &wg, c, sp, lp); err != nil {
		return res, err
	}
	var ds []*daemon
	for _, host := range partitionable {
		actor := "roll-run-" + host
		d, err := h.spawn(actor, host, rollTTL, "run", "roll-"+host, "--task", "T-"+actor, "--agent", actor,
			"--ttl", rollTTL.String(), "--grace", "1s", "--", h.self, "writer", "-key", "roll/run-"+host)
		if err != nil {
			return res, err
		}
		d.key = "roll/run-" + host
		ds = append(ds, d)
		actor = "roll-lead-" + host
		if d, err = h.spawn(actor, host, rollTTL, "lead", "roll", "--ttl", rollTTL.String(), "--grace", "1s",
			"--", h.self, "writer", "-key", "roll/lead"); err != nil {
			return res, err
		}
		d.key = "roll/lead"
		ds = append(ds, d)
	}
	defer func() {
		for _, d := range ds {
			d.finish()
			h.untrack(d)
		}
	}()
	// Every holder acting before the first restart.
	ready := time.Now().Add(30 * time.Second)
	for !h.rollHolding(ds) {
		if time.Now().After(ready) {
			return res, errors.New("the rolling restart's holders did not all hold within 30 s")
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return res, ctx.Err()
		}
	}
	fences := map[string]uint64{}
	for _, d := range ds {
		_, fences[d.actor] = h.chk.lastWrite(d.actor, ^uint64(0))
	}
	// Stream leaders first: that is the restart that used to pause writes.
	var order []int
	for _, s := range streams {
		if name, err := h.cl.leaderOf(ctx, s); err == nil {
			if i := h.cl.index(name); i >= 0 && !slices.Contains(order, i) {
				order = append(order, i)
			}
		}
	}
	for i := range h.cl.nodes {
		if !slices.Contains(order, i) {
			order = append(order, i)
		}
	}
	start := time.Now()
	for _, i := range order {
		at := time.Now()
		took, clean := h.cl.terminate(i)
		res.slowestExit = max(res.slowestExit, took)
		if !clean {
			res.unclean++
		}
		h.logf("rolling restart: %s exited %s after SIGTERM (clean %v)", h.cl.nodes[i].name, took.Round(time.Millisecond), clean)
		if err := h.cl.start(ctx, i); err != nil {
			return res, fmt.Errorf("rolling restart of %s: %w", h.cl.nodes[i].name, err)
		}
		h.waitHealthy(ctx)
		end := time.Now()
		res.pauses = append(res.pauses, max(sp.gap(at, end), lp.gap(at, end)))
		res.restarts++
		h.stats.fault("server_sigterm_rolling")
	}
	res.took = time.Since(start)
	sleep(ctx, rollTTL) // a holder lost at the last restart shows by now
	end := time.Now()
	res.pause = max(sp.gap(start, end), lp.gap(start, end))
	stopProbes()
	wg.Wait()
	res.holders = len(ds) + 2
	for _, p := range []*probe{sp, lp} {
		if p.lost != nil {
			res.lost = append(res.lost, fmt.Sprintf("%s: %v", p.name, p.lost))
		}
	}
	if !h.rollHolding(ds) {
		res.lost = append(res.lost, "after the rolling restart, not every run holds its slot and no lead leads (none wrote in the last 300 ms)")
	}
	for _, d := range ds {
		last, fence := h.chk.lastWrite(d.actor, ^uint64(0))
		switch {
		case d.verb == "run" && !d.alive():
			res.lost = append(res.lost, fmt.Sprintf("baton run %s exited (code %d) during the rolling restart", d.actor, d.code))
		case fence != fences[d.actor] || (d.verb == "run" && end.Sub(last) > time.Second):
			res.lost = append(res.lost, fmt.Sprintf("%s held fence %d before the restarts and %d (last write %s) after", d.actor, fences[d.actor], fence, last.Format("15:04:05.000")))
		}
	}
	return res, nil
}

// rollHolding reports whether each run holds its slot and one lead leads.
func (h *harness) rollHolding(ds []*daemon) bool {
	leading := false
	for _, d := range ds {
		last, fence := h.chk.lastWrite(d.actor, ^uint64(0))
		acting := fence > 0 && time.Since(last) < 300*time.Millisecond
		if d.verb == "run" && !acting {
			return false
		}
		leading = leading || (d.verb == "lead" && acting)
	}
	return leading
}

// startProbes holds a session and a lease at rollTTL through the library
// and renews each as fast as it is answered.
func (h *harness) startProbes(ctx context.Context, wg *sync.WaitGroup, c *kv.Client, sp, lp *probe) error {
	if err := os.MkdirAll(h.hostDir("roll"), 0o700); err != nil {
		return err
	}
	sd, err := hostlocal.OpenStateDir(h.hostDir("roll"))
	if err != nil {
		return err
	}
	m, err := session.NewManager(c, session.WithHostID("roll"), session.WithStateDir(sd))
	if err != nil {
		return err
	}
	s, err := m.Join(ctx, "roll-probe", "T-roll", session.WithAgent("roll-probe"), session.WithTTL(rollTTL))
	if err != nil {
		return fmt.Errorf("session probe: %w", err)
	}
	ls, err := lease.New(c, lease.WithHostID("roll"))
	if err != nil {
		return err
	}
	l, err := ls.Acquire(ctx, "roll-probe", lease.WithTTL(rollTTL), lease.WithoutKeepAlive())
	if err != nil {
		return fmt.Errorf("lease probe: %w", err)
	}
	loop := func(p *probe, write func(context.Context) error, lost error, done func()) {
		defer wg.Done()
		defer done()
		for sleep(ctx, 50*time.Millisecond) {
			wctx, cancel := context.WithTimeout(ctx, rollTTL)
			err := write(wctx)
			cancel()
			switch {
			case err == nil:
				p.ack(time.Now())
			case errors.Is(err, lost) && ctx.Err() == nil:
				p.lost = err
				return
			}
		}
	}
	wg.Add(2)
	go loop(sp, func(ctx context.Context) error {
		next, err := m.Commit(ctx, s, "")
		if err == nil {
			s = next
		}
		return err
	}, session.ErrLost, func() { _ = m.Close(context.Background(), s, "success") })
	go loop(lp, l.Renew, lease.ErrLost, func() { _ = l.Release(context.Background()) })
	return nil
}
