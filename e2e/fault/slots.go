package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// slotState is what the harness knows of a slot from acknowledged writes.
type slotState struct {
	holder   string
	fence    uint64
	maxFence uint64
	lastAck  time.Time // start of the last acknowledged join or commit
	open     bool      // joined, and no close started
	corrupt  time.Time // last garbage written over the record
	garbage  []span    // each garbage published over it that landed: from its publish to when it was known there
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
// session was no longer open). Garbage can land late (a publish whose
// answer was lost, committed once a partition heals) and be found only
// after the holder saw it: such a loss is a suspect until judgeLosses.
func (h *harness) gone(slot, agent string, fence uint64, r result, verb string, closing bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.slotLocked(slot)
	if st.holder != agent || st.fence != fence || (!st.open && !closing) {
		return
	}
	if r.end.Before(st.lastAck.Add(sessionTTL)) && !st.corrupt.After(st.lastAck) {
		h.suspect = append(h.suspect, suspectLoss{slot: slot, acked: st.lastAck, answered: r.end,
			msg: fmt.Sprintf("slot %s: %s's session (fence %d) renewed %s before, within its TTL %s, answered %s by %s: %s",
				slot, agent, fence, r.end.Sub(st.lastAck).Round(time.Millisecond), sessionTTL, exitName(r.code), verb, strings.TrimSpace(r.stderr))})
	}
	st.open = false
}

// suspectLoss is a session answered lost within its TTL of its last
// acknowledged write, with no garbage known over it at the answer.
type suspectLoss struct {
	slot            string
	acked, answered time.Time
	msg             string
}

// garbageLanded records garbage published over slot at published that was
// there (acknowledged, or found live) at landed.
func (h *harness) garbageLanded(slot string, published, landed time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.slotLocked(slot)
	st.garbage = append(st.garbage, span{start: published, end: landed})
}

// judgeLosses counts each suspect loss as an acknowledged session lost
// unless garbage that landed may have replaced the session between its
// last acknowledged write and the answer: published before the answer,
// and still there after the write started (garbage that landed before the
// write would have made the write fail, not succeed).
func (h *harness) judgeLosses() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.suspect {
		excused := false
		for _, g := range h.slotLocked(l.slot).garbage {
			if g.start.Before(l.answered) && g.end.After(l.acked) {
				excused = true
			}
		}
		if !excused {
			h.stats.lose("%s", l.msg)
		}
	}
	h.suspect = nil
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
