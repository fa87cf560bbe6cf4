package queue

// What a worker's index keeps of the records beside its tasks: the
// capacity tokens (the queues bucket) and the key locks (the sessions
// bucket), and what they say of the tasks that run under them.

import (
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// applyToken takes one entry of capacity token i: a live token is held
// (by nobody-knows-who if it does not decode: never free), anything else
// frees it.
func (x *index) applyToken(i int, e kv.Entry) {
	var tok *token
	if e.Live() {
		if t, err := decodeToken(e); err == nil {
			tok = t
		} else {
			tok = &token{Index: i} // held by nobody-knows-who: never free
		}
	}
	if tok == nil {
		delete(x.tokens, i)
		delete(x.sameHost, e.Key)
		x.tokenGone[i] = e.Revision
		if i < x.cfg.MaxActive && !x.reserved[i] {
			x.free.add(i)
		}
		return
	}
	tok.rev = e.Revision
	x.tokens[i] = tok
	delete(x.tokenGone, i)
	x.free.remove(i)
	if x.isSameHost(tok.Host, tok.PID, tok.PIDStart) {
		x.sameHost[e.Key] = holder{PID: tok.PID, PIDStart: tok.PIDStart, Token: i, Rev: e.Revision}
	} else {
		delete(x.sameHost, e.Key)
	}
}

// applySession takes one entry of the sessions watch, now being this
// host's time of its arrival.
func (x *index) applySession(e kv.Entry, now time.Time) {
	x.sessSeq = max(x.sessSeq, e.Revision)
	if old := x.slots[e.Key]; old != nil && old.Revision > e.Revision {
		return
	}
	var s *session.Session
	if e.Live() {
		s = lockView(e)
	} else if ks := x.keysOfSlot(e.Key); ks[0] != nil || ks[1] != nil {
		x.slotGone.set(e.Key, e.Revision, now)
		if id, en, ok := x.endingOf(e, now); ok {
			x.endings[id] = en
		}
	}
	x.setSlot(e.Key, s, now)
}

// metaEnded is the lock meta a worker's end writes into the lock's
// tombstone: the revision of the task's write that ended the attempt.
const metaEnded = "ended_rev"

// endingWait bounds how long an attempt whose lock's tombstone says it was
// ended waits for the queue's watch to deliver that end before it is
// checked as an orphan (a record that only looks like such a tombstone
// delays a recovery by no more).
const endingWait = 2 * time.Second

// ending is an attempt (its fence) whose holder wrote its end at rev and
// then removed its lock: until the queue's watch delivers rev, the task
// still looks active under a lock that is gone, and is no orphan.
type ending struct {
	fence, rev uint64
	until      time.Time // when it is checked as an orphan all the same
}

// endingOf reads a lock's tombstone e: a task of this queue whose holder
// ended its attempt at a revision the queue's watch has not delivered yet.
func (x *index) endingOf(e kv.Entry, now time.Time) (string, ending, bool) {
	if e.Op != kv.OpDelete || len(e.Value) == 0 {
		return "", ending{}, false
	}
	var note session.Record
	if err := note.UnmarshalJSON(e.Value); err != nil || note.Slot != e.Key || note.Meta["queue"] != x.q || note.Fence == 0 {
		return "", ending{}, false
	}
	id := note.Meta["task"]
	rev, err := strconv.ParseUint(note.Meta[metaEnded], 10, 64)
	if id == "" || err != nil || rev <= x.qSeq {
		return "", ending{}, false
	}
	return id, ending{fence: note.Fence, rev: rev, until: now.Add(endingWait)}, true
}

// nextEnding is when the earliest ending stops holding its task back from
// the orphan check (zero: none does).
func (x *index) nextEnding() time.Time {
	var at time.Time
	for id, en := range x.endings {
		if t := x.suspects[id]; t != nil && (at.IsZero() || en.until.Before(at)) {
			at = en.until
		}
	}
	return at
}

// setSlot records slot's live session s (nil: none) and refreshes what
// depends on it.
func (x *index) setSlot(slot string, s *session.Session, now time.Time) {
	if s == nil {
		delete(x.slots, slot)
		delete(x.sameHost, slot)
	} else {
		x.slots[slot] = s
		if s.Meta["queue"] == x.q && x.isSameHost(s.Host, s.PID, s.PIDStart) {
			h := holder{PID: s.PID, PIDStart: s.PIDStart, Slot: slot, Token: -1, Rev: s.Revision}
			h.ChildPID, _ = strconv.Atoi(s.Meta["child_pid"])
			h.ChildStart = s.Meta["child_pid_start"]
			x.sameHost[slot] = h
		} else {
			delete(x.sameHost, slot)
		}
	}
	for _, t := range x.active[slot] {
		x.suspects[t.id] = t
	}
	for _, k := range x.keysOfSlot(slot) {
		if k == nil {
			continue
		}
		x.refresh(k)
		x.tidy(k, now)
	}
}

// isSameHost reports whether a record's holder is another process of this
// host.
func (x *index) isSameHost(host string, pid int, start string) bool {
	return x.myPID != 0 && host == x.myHost && !(pid == x.myPID && start == x.myStart)
}

// keysOfSlot are the known keys one of whose lanes is slot (at most two:
// the key named slot, and the key whose lane it is), nil where none.
func (x *index) keysOfSlot(slot string) [2]*ikey {
	var out [2]*ikey
	rest, ok := strings.CutPrefix(slot, x.cfg.SlotPrefix)
	if !ok {
		return out
	}
	out[0] = x.keys[rest]
	if x.multiLane() {
		if i := strings.LastIndexByte(rest, '.'); i > 0 {
			if lane, err := strconv.Atoi(rest[i+1:]); err == nil && lane >= 1 && rest[i+1] != '0' {
				if k := x.keys[rest[:i]]; k != nil && lane < x.lanesOf(k) {
					out[1] = k
				}
			}
		}
	}
	return out
}
