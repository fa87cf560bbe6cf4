package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/session"
)

// The workload's shape: host ids, keys, TTLs.
var (
	hosts      = []string{"h1", "h2", "h3"}
	cliActors  = 4
	cliSlots   = []string{"c1", "c2", "c3"}
	runSlots   = []string{"r1", "r2", "r3"}
	leadKeys   = []string{"L1", "L2"}
	skews      = []time.Duration{3 * time.Hour, -5 * time.Hour}
	skewSlots  = []string{"k1", "k2"}
	sessionTTL = 12 * time.Second // join/commit sessions: longer than a stream leader election
	runTTL     = 4 * time.Second
	leadTTL    = 3 * time.Second
)

// slotState is what the harness knows of a slot from acknowledged writes.
type slotState struct {
	holder   string
	fence    uint64
	maxFence uint64
	lastAck  time.Time // start of the last acknowledged join or commit
	open     bool      // joined, and no close started
	corrupt  time.Time // last garbage written over the record
}

func (h *harness) slotLocked(slot string) *slotState {
	st := h.slots[slot]
	if st == nil {
		st = &slotState{}
		h.slots[slot] = st
	}
	return st
}

// joined records an acknowledged join. Another holder whose session was
// provably alive when the join was answered is an exclusion violation: its
// TTL ran from no earlier than the start of its last acknowledged write.
// Joins are recorded as they are answered; one answered out of order would
// have to take longer than a session's TTL (12 s), where every call to the
// server is bounded by BATON_TIMEOUT (3 s).
func (h *harness) joined(slot, agent string, fence uint64, r result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.slotLocked(slot)
	if st.open && st.holder != agent && r.end.Before(st.lastAck.Add(sessionTTL)) && !st.corrupt.After(st.lastAck) {
		h.stats.violation("slot %s: %s joined (fence %d) %s after %s's session (fence %d) was last renewed, within its TTL %s",
			slot, agent, fence, r.end.Sub(st.lastAck).Round(time.Millisecond), st.holder, st.fence, sessionTTL)
	}
	if fence <= st.maxFence {
		h.stats.violation("slot %s: fence %d given to %s is not larger than %d given before", slot, fence, agent, st.maxFence)
	}
	st.holder, st.fence, st.maxFence, st.open, st.lastAck = agent, fence, max(fence, st.maxFence), true, r.start
}

// renewed records an acknowledged commit.
func (h *harness) renewed(slot, agent string, fence uint64, r result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.slotLocked(slot); st.holder == agent && st.fence == fence {
		st.lastAck = r.start
	}
}

// gone records that agent's session answered as lost or absent. If it was
// acknowledged within its TTL before the answer and no garbage hit it, an
// acknowledged session was lost. close says the close had started (the
// session was no longer open).
func (h *harness) gone(slot, agent string, fence uint64, r result, verb string, closing bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.slotLocked(slot)
	if st.holder != agent || st.fence != fence || (!st.open && !closing) {
		return
	}
	if r.end.Before(st.lastAck.Add(sessionTTL)) && !st.corrupt.After(st.lastAck) {
		h.stats.lose("slot %s: %s's session (fence %d) renewed %s before, within its TTL %s, answered %s by %s: %s",
			slot, agent, fence, r.end.Sub(st.lastAck).Round(time.Millisecond), sessionTTL, exitName(r.code), verb, strings.TrimSpace(r.stderr))
	}
	st.open = false
}

func (h *harness) closing(slot, agent string, fence uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.slotLocked(slot); st.holder == agent && st.fence == fence {
		st.open = false
	}
}

func exitName(code int) string {
	switch code {
	case 3:
		return "lost (exit 3)"
	case 5:
		return "not found (exit 5)"
	}
	return "exit " + strconv.Itoa(code)
}

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
func (h *harness) skewedClient(ctx context.Context) (*kv.Client, error) {
	return kv.Connect(ctx, kv.WithURL(h.cl.urls()), kv.WithTimeout(3*time.Second), kv.WithName("batonfault skewed"))
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
		errors.Is(err, lease.ErrUndecodable), errors.Is(err, lease.ErrLost):
		return 3
	case errors.Is(err, kv.ErrUnavailable):
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
	c, err := h.skewedClient(ctx)
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
	c, err := h.skewedClient(ctx)
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

// clientFaults SIGKILLs or SIGSTOPs (for longer than the TTL) a running
// `run` or `lead`, preferring one whose command is writing as the holder.
func (h *harness) clientFaults(ctx context.Context) {
	for sleep(ctx, h.between(1500*time.Millisecond, 3*time.Second)) {
		d := h.pickHolder()
		if d == nil {
			continue
		}
		if h.intn(10) < 4 {
			if d.cmd.Process.Kill() == nil {
				h.stats.fault("client_sigkill")
				h.logf("SIGKILL %s", d.actor)
			}
			continue
		}
		_, fence := h.chk.lastWrite(d.actor, math.MaxUint64)
		if !d.pause() {
			continue
		}
		h.stats.fault("client_sigstop")
		pause := d.ttl + h.between(time.Second, 3*time.Second)
		h.logf("SIGSTOP %s (fence %d) for %s", d.actor, fence, pause)
		sleep(ctx, pause)
		d.cont()
		h.mu.Lock()
		h.pauses = append(h.pauses, pauseCheck{actor: d.actor, fence: fence, resumed: time.Now()})
		h.mu.Unlock()
	}
}

// pauseCheck: a holder paused past its TTL must stop acting under its old
// fence once it resumes.
type pauseCheck struct {
	actor   string
	fence   uint64
	resumed time.Time
}

// stopAfterResume bounds how long a resumed `run` or `lead` whose holding
// expired while it was stopped may let its command act: its local deadline
// has passed, so it stops the command at once, with SIGKILL after at most
// its 2 s grace.
const stopAfterResume = 5 * time.Second

// checkPauses runs once every daemon has been stopped: a command still
// writing under its pre-pause fence stopAfterResume after its baton resumed
// did not stop when it had to.
func (h *harness) checkPauses() {
	h.mu.Lock()
	pending := h.pauses
	h.mu.Unlock()
	for _, p := range pending {
		if p.fence == 0 {
			continue
		}
		if last, _ := h.chk.lastWrite(p.actor, p.fence); last.After(p.resumed.Add(stopAfterResume)) {
			h.stats.stick("%s kept writing under fence %d for %s after its baton resumed past its TTL",
				p.actor, p.fence, last.Sub(p.resumed).Round(time.Millisecond))
		}
	}
}

// pickHolder picks a live daemon, three times in four one whose command
// wrote in the last 300 ms (a holder).
func (h *harness) pickHolder() *daemon {
	h.mu.Lock()
	var live []*daemon
	for d := range h.daemons {
		if d.alive() {
			live = append(live, d)
		}
	}
	h.mu.Unlock()
	sortDaemons(live)
	var holders []*daemon
	for _, d := range live {
		if last, _ := h.chk.lastWrite(d.actor, math.MaxUint64); time.Since(last) < 300*time.Millisecond {
			holders = append(holders, d)
		}
	}
	switch {
	case len(holders) > 0 && h.intn(4) > 0:
		return holders[h.intn(len(holders))]
	case len(live) > 0:
		return live[h.intn(len(live))]
	}
	return nil
}

func sortDaemons(ds []*daemon) {
	slices.SortFunc(ds, func(a, b *daemon) int { return strings.Compare(a.actor, b.actor) })
}

// garbage overwrites a session or leader record with random bytes through
// the raw NATS API, then, as an operator would, removes exactly that
// garbage (a delete conditioned on its revision).
func (h *harness) garbage(ctx context.Context) {
	nc, err := nats.Connect(h.cl.urls(), nats.MaxReconnects(-1))
	if err != nil {
		h.stats.stick("garbage: connect: %v", err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		h.stats.stick("garbage: %v", err)
		return
	}
	for sleep(ctx, h.between(6*time.Second, 12*time.Second)) {
		bucket, key := "baton-sessions", cliSlots[h.intn(len(cliSlots))]
		if h.intn(10) < 3 {
			bucket, key = "baton-leases", lease.LeaderKey(leadKeys[h.intn(len(leadKeys))])
		}
		junk := make([]byte, 1+h.intn(64))
		for i := range junk {
			junk[i] = byte(h.intn(256))
		}
		// The session is marked corrupt from before the publish to after
		// its answer: a write acknowledged in between may be the one the
		// garbage replaced.
		h.markCorrupt(bucket, key)
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.Publish(pctx, "$KV."+bucket+"."+key, junk)
		cancel()
		h.markCorrupt(bucket, key)
		if err == nil {
			h.stats.fault("garbage_record")
			h.logf("garbage in %s %s", bucket, key)
			sleep(ctx, h.between(2*time.Second, 5*time.Second))
		}
		// Also after a failed publish: its answer may be what was lost.
		h.removeGarbage(js, bucket, key, junk)
	}
}

func (h *harness) markCorrupt(bucket, key string) {
	if bucket != "baton-sessions" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slotLocked(key).corrupt = time.Now()
}

// removeGarbage deletes key if its latest value is junk (a delete
// conditioned on that revision, so a record written since is left alone),
// retrying while the cluster is electing.
func (h *harness) removeGarbage(js jetstream.JetStream, bucket, key string, junk []byte) {
	deadline := time.Now().Add(stuckAfter)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b, err := js.KeyValue(ctx, bucket)
		var e jetstream.KeyValueEntry
		if err == nil {
			e, err = b.Get(ctx, key)
		}
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			err = nil // not there (never landed, or already gone)
		case err == nil && bytes.Equal(e.Value(), junk):
			err = b.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
			if errors.Is(err, jetstream.ErrKeyExists) {
				err = nil // a holder replaced it meanwhile
			}
		}
		cancel()
		if err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	h.stats.stick("could not remove the garbage in %s %s within %s", bucket, key, stuckAfter)
}

// serverFaults SIGKILLs a server every 20–30 s, alternating between the
// server leading a bucket's stream and each server in turn, and restarts it
// 2–6 s later.
func (h *harness) serverFaults(ctx context.Context) error {
	var kills []time.Time
	defer func() {
		for _, at := range kills {
			if d, ok := h.stats.firstWriteAfter(at); ok {
				h.stats.mu.Lock()
				h.stats.recovery = append(h.stats.recovery, d)
				h.stats.mu.Unlock()
			}
			var worst time.Duration
			to := at.Add(30 * time.Second)
			if now := time.Now(); now.Before(to) {
				to = now
			}
			for _, key := range leadKeys {
				worst = max(worst, h.chk.longestGap("lead/"+key, at, to))
			}
			h.stats.mu.Lock()
			h.stats.leadGaps = append(h.stats.leadGaps, worst)
			h.stats.mu.Unlock()
		}
	}()
	streams := []string{"KV_baton-sessions", "KV_baton-leases"}
	for k := 0; sleep(ctx, h.between(20*time.Second, 30*time.Second)); k++ {
		i, kind := (k/2)%len(h.cl.nodes), "server_sigkill"
		if k%2 == 0 {
			name, err := h.cl.leaderOf(ctx, streams[(k/2)%2])
			if j := h.cl.index(name); err == nil && j >= 0 {
				i, kind = j, "server_sigkill_stream_leader"
			}
		}
		at := time.Now()
		h.cl.kill(i)
		kills = append(kills, at)
		h.stats.fault(kind)
		h.stats.serverKilled(h.cl.nodes[i].name)
		down := h.between(2*time.Second, 6*time.Second)
		h.logf("SIGKILL server %s (%s), restart in %s", h.cl.nodes[i].name, kind, down)
		time.Sleep(down)
		if err := h.cl.start(context.Background(), i); err != nil {
			return fmt.Errorf("restart %s: %w", h.cl.nodes[i].name, err)
		}
	}
	return nil
}
