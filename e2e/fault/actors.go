package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/session"
)

// The workload's shape: host ids, keys, TTLs.
var (
	hosts       = []string{"h1", "h2", "h3"}
	serverNames = []string{"n1", "n2", "n3"}
	cliActors   = 4
	cliSlots    = []string{"c1", "c2", "c3"}
	runSlots    = []string{"r1", "r2", "r3"}
	leadKeys    = []string{"L1", "L2"}
	skews       = []time.Duration{3 * time.Hour, -5 * time.Hour}
	skewSlots   = []string{"k1", "k2"}
	sessionTTL  = 12 * time.Second // join/commit sessions: longer than a stream leader election
	runTTL      = 4 * time.Second
	leadTTL     = 3 * time.Second
)

// cliSessions is one agent using join, commit and close through the CLI on
// random slots and hosts; sometimes it walks away and lets the session
// expire.
func (h *harness) cliSessions(ctx context.Context, i int) {
	agent := fmt.Sprintf("cli%d", i)
	for ctx.Err() == nil {
		slot, host := cliSlots[h.intn(len(cliSlots))], hosts[h.intn(len(hosts))]
		r := h.cli(host, "join", slot, "--task", "T-"+agent, "--agent", agent, "--ttl", sessionTTL.String(), "--json")
		if r.code != 0 {
			sleep(ctx, h.between(200*time.Millisecond, time.Second))
			continue
		}
		var doc struct {
			Fence uint64 `json:"fence"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Fence == 0 {
			h.stats.violation("join %s by %s: exit 0 without a fence in its JSON: %q", slot, agent, r.stdout)
			continue
		}
		fence := strconv.FormatUint(doc.Fence, 10)
		h.joined(slot, agent, doc.Fence, r)
		alive := true
		for k := 2 + h.intn(5); k > 0 && alive && ctx.Err() == nil; k-- {
			sleep(ctx, h.between(800*time.Millisecond, 2500*time.Millisecond))
			r := h.cli(host, "commit", slot, "--fence", fence, "-m", "step")
			switch r.code {
			case 0:
				h.renewed(slot, agent, doc.Fence, r)
			case 3, 5:
				h.gone(slot, agent, doc.Fence, r, "commit", false)
				alive = false
			}
		}
		if !alive || h.intn(5) == 0 {
			continue // lost, or walked away: the session expires
		}
		h.closing(slot, agent, doc.Fence)
		r = h.cli(host, "close", slot, "--fence", fence, "--strict")
		if r.code == 3 || r.code == 5 {
			h.gone(slot, agent, doc.Fence, r, "close", true)
		}
	}
}

// runner starts `baton run` on slot again and again; its command writes to
// the checker under the session's fence.
func (h *harness) runner(ctx context.Context, slot, host string, j int) {
	for n := 0; ctx.Err() == nil; n++ {
		actor := fmt.Sprintf("run-%s-%d-%d", slot, j, n)
		d, err := h.spawn(actor, host, runTTL, "run", slot, "--task", "T-"+actor, "--agent", actor,
			"--ttl", runTTL.String(), "--grace", "2s", "--", h.self, "writer", "-key", "run/"+slot)
		if err != nil {
			h.stats.stick("start run %s: %v", actor, err)
			return
		}
		d.key = "run/" + slot
		h.hold(ctx, d, h.between(5*time.Second, 15*time.Second))
		sleep(ctx, h.between(300*time.Millisecond, 1500*time.Millisecond))
	}
}

// leader runs `baton lead` for key on host again and again, each for a
// while, then ends it gracefully (a handover).
func (h *harness) leader(ctx context.Context, key, host string, j int) {
	for n := 0; ctx.Err() == nil; n++ {
		actor := fmt.Sprintf("lead-%s-%d-%d", key, j, n)
		d, err := h.spawn(actor, host, leadTTL, "lead", key, "--ttl", leadTTL.String(), "--grace", "2s",
			"--", h.self, "writer", "-key", "lead/"+key)
		if err != nil {
			h.stats.stick("start lead %s: %v", actor, err)
			return
		}
		d.key = "lead/" + key
		h.hold(ctx, d, h.between(10*time.Second, 30*time.Second))
		sleep(ctx, h.between(200*time.Millisecond, time.Second))
	}
}

// hold lets d run for up to d, then stops it; it counts the daemon as one
// operation, stuck if it did not end within stuckAfter of SIGTERM.
func (h *harness) hold(ctx context.Context, d *daemon, life time.Duration) {
	start := time.Now()
	t := time.NewTimer(life)
	defer t.Stop()
	select {
	case <-d.exited:
	case <-t.C:
	case <-ctx.Done():
	}
	ended := true
	if d.alive() {
		ended = d.finish()
	}
	h.untrack(d)
	r := result{code: d.code, start: start, end: time.Now(), stuck: !ended, what: d.verb + " " + d.actor + " (SIGTERM)"}
	h.stats.op(d.verb, r)
}

// skewedClient connects a library client for the skewed actors.
func (h *harness) skewedClient(ctx context.Context, name string) (*kv.Client, error) {
	tr, err := h.tr.tracer(name)
	if err != nil {
		return nil, err
	}
	return kv.Connect(ctx, kv.WithURL(h.cl.urls()), kv.WithTimeout(3*time.Second), kv.WithName("batonfault skewed"), kv.WithTracer(tr))
}

// libCode is the exit code the CLI would give err (the CLI's mapping is
// internal to it; this covers what the library returns here).
func libCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, session.ErrNotFound), errors.Is(err, lease.ErrNotFound):
		return 5
	case errors.Is(err, session.ErrForeignHost):
		return 4
	case errors.Is(err, session.ErrHeld), errors.Is(err, session.ErrUndecodable), errors.Is(err, session.ErrLost),
		errors.Is(err, session.ErrGateBusy), errors.Is(err, kv.ErrConflict), errors.Is(err, lease.ErrHeld),
		errors.Is(err, lease.ErrUndecodable), errors.Is(err, lease.ErrLost), errors.Is(err, rate.ErrLimited):
		return 3
	case errors.Is(err, kv.ErrUnavailable), errors.Is(err, kv.ErrStorageFull):
		return 6
	default:
		return 1
	}
}

// libOp runs one library call with the stuck bound and counts it.
func (h *harness) libOp(verb string, fn func(ctx context.Context) error) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stuckAfter)
	defer cancel()
	r := result{start: time.Now()}
	err := fn(ctx)
	r.end = time.Now()
	r.code = libCode(err)
	r.stuck = ctx.Err() != nil
	if err != nil {
		r.stderr = err.Error()
	}
	h.stats.op(verb, r)
	return r, err
}

// skewedSessions joins, commits and closes through the library with a
// clock hours off, on slots that the other skewed actor contends for from
// another host.
func (h *harness) skewedSessions(ctx context.Context, i int, skew time.Duration) {
	c, err := h.skewedClient(ctx, fmt.Sprintf("lib-sessions-%d", i))
	if err != nil {
		h.stats.stick("skewed client: %v", err)
		return
	}
	defer c.Close()
	host := fmt.Sprintf("skew%d", i)
	sd, err := hostlocal.OpenStateDir(h.hostDir(host))
	if err == nil {
		var m *session.Manager
		m, err = session.NewManager(c, session.WithHostID(host), session.WithStateDir(sd),
			session.WithClock(func() time.Time { return time.Now().Add(skew) }))
		if err == nil {
			h.skewedLoop(ctx, m, "lib"+host)
			return
		}
	}
	h.stats.stick("skewed manager: %v", err)
}

func (h *harness) skewedLoop(ctx context.Context, m *session.Manager, agent string) {
	for ctx.Err() == nil {
		slot := skewSlots[h.intn(len(skewSlots))]
		var s *session.Session
		h.stats.fault("skewed_clock_op")
		r, err := h.libOp("lib-join", func(ctx context.Context) (err error) {
			s, err = m.Join(ctx, slot, "T-"+agent, session.WithAgent(agent), session.WithTTL(sessionTTL))
			return err
		})
		if err != nil {
			sleep(ctx, h.between(200*time.Millisecond, time.Second))
			continue
		}
		h.joined(slot, agent, s.Fence, r)
		fence := s.Fence
		alive := true
		for k := 2 + h.intn(4); k > 0 && alive && ctx.Err() == nil; k-- {
			sleep(ctx, h.between(800*time.Millisecond, 2500*time.Millisecond))
			r, err := h.libOp("lib-commit", func(ctx context.Context) error {
				next, err := m.Commit(ctx, s, "step")
				if err == nil {
					s = next
				}
				return err
			})
			switch r.code {
			case 0:
				h.renewed(slot, agent, fence, r)
			case 3, 5:
				h.gone(slot, agent, fence, r, "commit", false)
				alive = false
			default:
				_ = err // unavailable: try again on the next round
			}
		}
		if !alive {
			continue
		}
		h.closing(slot, agent, fence)
		r, _ = h.libOp("lib-close", func(ctx context.Context) error { return m.Close(ctx, s, "success") })
		if r.code == 3 || r.code == 5 {
			h.gone(slot, agent, fence, r, "close", true)
		}
	}
}

// skewedLeases acquires one lease key through the library with a clock
// hours off and writes to the checker under its fence while it holds it.
func (h *harness) skewedLeases(ctx context.Context, i int, skew time.Duration) {
	c, err := h.skewedClient(ctx, fmt.Sprintf("lib-leases-%d", i))
	if err != nil {
		h.stats.stick("skewed client: %v", err)
		return
	}
	defer c.Close()
	host := fmt.Sprintf("skew%d", i)
	ls, err := lease.New(c, lease.WithHostID(host), lease.WithClock(func() time.Time { return time.Now().Add(skew) }))
	if err != nil {
		h.stats.stick("skewed leases: %v", err)
		return
	}
	writer := fmt.Sprintf("liblease%d/%d", i, 0)
	for ctx.Err() == nil {
		var l *lease.Lease
		h.stats.fault("skewed_clock_op")
		_, err := h.libOp("lib-acquire", func(opCtx context.Context) (err error) {
			// Waiting for the holder is not being stuck: bound the wait.
			wctx, cancel := context.WithTimeout(opCtx, 8*time.Second)
			defer cancel()
			l, err = ls.Acquire(wctx, "skew", lease.WithTTL(leadTTL))
			if errors.Is(err, context.DeadlineExceeded) && opCtx.Err() == nil {
				err = lease.ErrHeld
			}
			return err
		})
		if err != nil {
			sleep(ctx, h.between(200*time.Millisecond, time.Second))
			continue
		}
		until := time.After(h.between(3*time.Second, 10*time.Second))
	hold:
		for {
			h.chk.write("lease/skew", l.Fence(), writer, time.Time{})
			select {
			case <-l.Done():
				break hold
			case <-until:
				break hold
			case <-ctx.Done():
				break hold
			case <-time.After(50 * time.Millisecond):
			}
		}
		_, _ = h.libOp("lib-release", func(ctx context.Context) error { return l.Release(ctx) })
	}
}
