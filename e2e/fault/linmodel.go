package main

// The model of one JetStream KV key that each history is checked against
// (see lin.go and adr/0026).

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/batonhq/baton/kv"
)

// linInput is an operation as invoked: Op is TraceLatest for both reads,
// Called the operation called.
type linInput struct {
	Op, Called kv.TraceOp
	Expected   uint64
	Value      string // a write's digest
	// TTL is the written value's or tombstone's TTL, the bucket's applied
	// (0: none); MarkerTTL is how long the bucket keeps expiry markers.
	TTL, MarkerTTL int64
	Call           int64 // invoked, Unix ns
}

// linOutput is how it returned.
type linOutput struct {
	Outcome kv.Outcome
	Rev     uint64    // an acknowledged write's revision
	Entry   *linEntry // what a read (or a conflict) saw
	Return  int64     // Unix ns, or linNever
}

// linEntry is an entry a read returned.
type linEntry struct {
	Rev   uint64
	Kind  linKind
	Value string
}

// linKind is what a key's latest message is.
type linKind uint8

const (
	linAbsent  linKind = iota // no message at all
	linLive                   // a value
	linDeleted                // a tombstone a client wrote
	linExpired                // the marker the server wrote when the value's TTL ran out
)

func linKindOf(op string) linKind {
	switch op {
	case kv.OpPut.String():
		return linLive
	case kv.OpDelete.String():
		return linDeleted
	case kv.OpExpire.String():
		return linExpired
	}
	return linAbsent
}

func (k linKind) String() string {
	return [...]string{"absent", "live", "deleted", "expired"}[k]
}

// linState is one possible state of a key: its latest message.
type linState struct {
	kind linKind
	// rev is the message's revision, 0 while unknown (written by a call
	// whose outcome is unknown, or by the server's expiry, and not read
	// since); floor is a revision known to be smaller (for absent: the last
	// revision the key had).
	rev, floor uint64
	value      string // a value's or a tombstone's digest
	// since is when a value's TTL started (its write's invocation, the
	// earliest it can have been applied) or the earliest a marker can have
	// appeared; ttl is how long after since it may go (0: it stays).
	since, ttl int64
	// notBefore bounds the linearization point from below: a timeout that
	// happened in this state's past cannot have happened before it.
	notBefore int64
}

// revOrFloor is the largest revision the key is known to have had.
func (s linState) revOrFloor() uint64 { return max(s.rev, s.floor) }

// hasRev reports whether the message may be at revision r.
func (s linState) hasRev(r uint64) bool {
	if s.kind == linAbsent {
		return false
	}
	if s.rev != 0 {
		return s.rev == r
	}
	return r > s.floor
}

// timeouts are the states s can turn into on its own by time now: a value
// whose TTL ran out becomes an expiry marker, a marker or tombstone whose
// TTL ran out disappears.
//
// A tombstone whose TTL ran out may also be followed by an expiry marker
// (nats-server 2.15: seen once, in an hour's soak with servers killed and
// full disks, seed 1795756017144579026: a presence record deleted at 22 s
// read as expired 9 minutes later, at a revision written long after the
// tombstone's 5 minutes). Either way the key has no value, which is all
// baton relies on. The marker may have come at any time from the
// tombstone's TTL's end up to now; its since is that end, the earliest,
// so that its state is the same whichever call finds it.
func (s linState) timeouts(now, markerTTL int64, out []linState) []linState {
	out = append(out, s)
	if s.ttl <= 0 || s.kind == linAbsent || s.since > now-s.ttl {
		return out
	}
	at := s.since + s.ttl
	next := linState{floor: s.revOrFloor(), notBefore: max(s.notBefore, at)}
	if s.kind == linLive {
		next.kind, next.since, next.ttl = linExpired, at, markerTTL
	}
	if s.kind == linDeleted {
		out = append(out, linState{kind: linExpired, floor: s.revOrFloor(), notBefore: max(s.notBefore, at), since: at, ttl: markerTTL})
	}
	return next.timeouts(now, markerTTL, out)
}

// observe is s as a read that saw e (nil: no message at all) leaves it, if
// s can show e.
func (s linState) observe(e *linEntry) (linState, bool) {
	if e == nil {
		return s, s.kind == linAbsent
	}
	if s.kind != e.Kind || !s.hasRev(e.Rev) || e.Kind != linExpired && s.value != e.Value {
		return s, false
	}
	s.rev = e.Rev
	return s, true
}

// holds reports whether a write's condition may hold in s, and certain
// whether it certainly does.
func (in linInput) holds(s linState) (may, certain bool) {
	switch in.Op {
	case kv.TracePut:
		return true, true
	case kv.TraceCreate, kv.TraceCreateAfter:
		if s.kind != linLive {
			return true, true
		}
		if in.Expected != 0 && s.hasRev(in.Expected) {
			return true, s.rev != 0 // CreateAfter of a live revision: the server takes it
		}
		return false, false
	default: // update, delete: the latest revision must be Expected
		return s.hasRev(in.Expected), s.rev != 0 && s.rev == in.Expected
	}
}

// apply is the state after in was applied in s at revision rev (0: unknown).
func (in linInput) apply(s linState, rev uint64) linState {
	n := linState{kind: linLive, rev: rev, value: in.Value, since: in.Call, ttl: in.TTL, notBefore: s.notBefore}
	if in.Op == kv.TraceDelete {
		n.kind = linDeleted
	}
	if rev == 0 {
		n.floor = s.revOrFloor()
		if in.Op == kv.TraceUpdate || in.Op == kv.TraceDelete {
			n.floor = max(n.floor, in.Expected)
		}
	}
	return n
}

// linStep is the model's step: every state s can be in after the operation.
func linStep(st, input, output any) []any {
	s, in, out := st.(linState), input.(linInput), output.(linOutput)
	if out.Return < s.notBefore {
		return nil
	}
	var next []any
	if in.Op == kv.TraceLatest || out.Outcome != kv.OutcomeUnknown {
		for _, c := range s.timeouts(out.Return, in.MarkerTTL, nil) {
			switch {
			case in.Op == kv.TraceLatest:
				if n, ok := c.observe(out.Entry); ok {
					next = append(next, n)
				}
			case out.Outcome == kv.OutcomeOK:
				may, _ := in.holds(c)
				floor := c.revOrFloor()
				if in.Op == kv.TraceUpdate || in.Op == kv.TraceDelete {
					floor = max(floor, in.Expected)
				}
				if may && out.Rev > floor {
					next = append(next, in.apply(c, out.Rev))
				}
			case out.Outcome == kv.OutcomeConflict:
				if _, certain := in.holds(c); certain {
					continue
				}
				if out.Entry == nil {
					next = append(next, c)
				} else if n, ok := c.observe(out.Entry); ok {
					next = append(next, n)
				}
			}
		}
		return next
	}
	// Unknown: not applied (yet), or applied now at a revision not known.
	next = append(next, s)
	for _, c := range s.timeouts(out.Return, in.MarkerTTL, nil) {
		if may, _ := in.holds(c); may {
			next = append(next, in.apply(c, 0))
		}
	}
	return next
}

// linModel is the model of one key; t0 is the history's first call, which
// descriptions count time from.
func linModel(t0 int64) porcupine.Model {
	at := func(ns int64) string {
		if ns == linNever {
			return "never"
		}
		return time.Duration(ns - t0).Round(time.Millisecond).String()
	}
	short := func(d string) string {
		if i := strings.IndexByte(d, ':'); i > 8 {
			return d[:8] + d[i:]
		}
		return d
	}
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{linState{}} },
		Step: linStep,
		Hash: func(st any) uint64 {
			s := st.(linState)
			b := make([]byte, 0, 1+6*8+len(s.value))
			b = append(b, byte(s.kind))
			for _, n := range []uint64{s.rev, s.floor, uint64(s.since), uint64(s.ttl), uint64(s.notBefore)} {
				b = binary.LittleEndian.AppendUint64(b, n)
			}
			h := fnv.New64a()
			_, _ = h.Write(append(b, s.value...))
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(linInput), output.(linOutput)
			var b strings.Builder
			b.WriteString(string(in.Called))
			if in.Op == kv.TraceLatest {
				b.WriteString("()")
			} else {
				fmt.Fprintf(&b, "(%s", short(in.Value))
				if in.Expected != 0 {
					fmt.Fprintf(&b, ", rev %d", in.Expected)
				}
				if in.TTL != 0 {
					fmt.Fprintf(&b, ", ttl %s", time.Duration(in.TTL))
				}
				b.WriteString(")")
			}
			fmt.Fprintf(&b, " -> %s", out.Outcome)
			if out.Rev != 0 {
				fmt.Fprintf(&b, " %d", out.Rev)
			}
			if e := out.Entry; e != nil {
				fmt.Fprintf(&b, " %s@%d %s", e.Kind, e.Rev, short(e.Value))
			}
			fmt.Fprintf(&b, " [%s, %s]", at(in.Call), at(out.Return))
			return b.String()
		},
		DescribeState: func(st any) string {
			s := st.(linState)
			rev := fmt.Sprint(s.rev)
			if s.rev == 0 {
				rev = fmt.Sprintf(">%d", s.floor)
			}
			if s.kind == linAbsent {
				return fmt.Sprintf("absent (after %d)", s.floor)
			}
			d := fmt.Sprintf("%s@%s %s since %s", s.kind, rev, short(s.value), at(s.since))
			if s.ttl > 0 {
				d += " ttl " + time.Duration(s.ttl).String()
			}
			if s.notBefore > 0 {
				d += " not before " + at(s.notBefore)
			}
			return d
		},
		DescribeOperationMetadata: func(info any) string {
			if info == nil {
				return ""
			}
			return info.(string)
		},
	}
	return nm.ToModel()
}
