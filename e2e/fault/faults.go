package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
)

// clientFaults SIGKILLs or SIGSTOPs (for longer than the TTL) a running
// `run` or `lead`, preferring one whose command is writing as the holder.
func (h *harness) clientFaults(ctx context.Context) {
	for sleep(ctx, h.between(1500*time.Millisecond, 3*time.Second)) {
		d := h.pickHolder()
		if d == nil {
			continue
		}
		if h.intn(10) < 4 {
			if d.kill() {
				h.stats.fault("client_sigkill")
				h.logf("SIGKILL %s", d.actor)
			}
			continue
		}
		_, fence := h.chk.lastWrite(d.actor, math.MaxUint64)
		pausedAt := time.Now()
		if !d.pause() {
			continue
		}
		h.stats.fault("client_sigstop")
		pause := d.ttl + h.between(time.Second, 3*time.Second)
		h.logf("SIGSTOP %s (fence %d) for %s", d.actor, fence, pause)
		sleep(ctx, pause)
		d.cont()
		h.mu.Lock()
		h.pauses = append(h.pauses, pauseCheck{actor: d.actor, fence: fence, paused: pausedAt, resumed: time.Now()})
		h.mu.Unlock()
	}
}

// pauseCheck: a holder paused past its TTL must stop acting under its old
// fence once it resumes.
type pauseCheck struct {
	actor   string
	fence   uint64
	paused  time.Time
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
	raw, err := h.rawClients("lib-garbage")
	if err != nil {
		h.stats.stick("garbage: %v", err)
		return
	}
	defer raw.close()
	for sleep(ctx, h.between(6*time.Second, 12*time.Second)) {
		s := shot{bucket: sessionsBucket.Name, key: cliSlots[h.intn(len(cliSlots))], kind: "garbage_record"}
		if h.intn(10) < 3 {
			s.bucket, s.key = leasesBucket.Name, lease.LeaderKey(leadKeys[h.intn(len(leadKeys))])
		}
		s.junk = make([]byte, 1+h.intn(64))
		for i := range s.junk {
			s.junk[i] = byte(h.intn(256))
		}
		// The session is marked corrupt from before the publish to after
		// its answer: a write acknowledged in between may be the one the
		// garbage replaced.
		published := time.Now()
		h.markCorrupt(s.bucket, s.key)
		err := raw.publish(ctx, h.tr, s.bucket, s.key, s.junk)
		h.markCorrupt(s.bucket, s.key)
		if err == nil {
			h.landed(s.bucket, s.key, published)
			h.stats.fault(s.kind)
			h.logf("garbage in %s %s", s.bucket, s.key)
			sleep(ctx, h.between(2*time.Second, 5*time.Second))
		}
		// Also after a failed publish: its answer may be what was lost, and
		// it may land later still, once a partition heals.
		h.undoGarbage(raw.kc, s, published, err != nil)
	}
}

// lateLanding is how long an unanswered publish of garbage is looked for:
// longer than a partition lasts.
const lateLanding = 20 * time.Second

// landed records garbage published at published as there now.
func (h *harness) landed(bucket, key string, published time.Time) {
	if bucket == "baton-sessions" {
		h.garbageLanded(key, published, time.Now())
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

// undoGarbage removes the junk of s if it is key's latest value (a delete
// conditioned on that revision, so a record written since is left alone),
// or puts back s.restore in its place (an update conditioned likewise),
// retrying while the cluster is electing. A publish whose answer was lost
// (unanswered) is looked for a while longer when not there yet: it may be
// committed once a partition heals. It goes through a traced kv client, so
// that the undoing is in the run's KV histories.
//
// It reports whether it found the junk there, and whether it removed it (a
// delete, not a restore).
func (h *harness) undoGarbage(c *kv.Client, s shot, published time.Time, unanswered bool) (found, removed bool) {
	b := c.Bucket(bucketConfigs[s.bucket])
	deadline := time.Now().Add(stuckAfter)
	lookUntil := time.Now()
	if unanswered {
		lookUntil = lookUntil.Add(lateLanding)
	}
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e, err := b.Latest(ctx, s.key)
		here := false
		switch {
		case errors.Is(err, kv.ErrNotFound):
			err = nil // not there (never landed, or already gone)
		case err == nil && e.Live() && bytes.Equal(e.Value, s.junk):
			here, found = true, true
			// The junk is there now: whatever the session held was
			// replaced by it, however late it landed (a publish that timed
			// out can still be committed once a partition heals, seconds
			// after its answer).
			h.markCorrupt(s.bucket, s.key)
			h.landed(s.bucket, s.key, published)
			if s.restore != nil {
				_, err = b.Update(ctx, s.key, s.restore, s.restoreTTL, e.Revision)
			} else {
				_, err = b.DeleteRevision(ctx, s.key, e.Revision, nil)
				removed = removed || err == nil
			}
			if errors.Is(err, kv.ErrConflict) {
				err = nil // a holder replaced it meanwhile
			}
		}
		cancel()
		if err == nil && (here || time.Now().After(lookUntil)) {
			return found, removed
		}
		time.Sleep(500 * time.Millisecond)
	}
	h.stats.stick("could not undo the garbage in %s %s within %s", s.bucket, s.key, stuckAfter)
	return found, removed
}
