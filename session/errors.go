package session

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrInvalid means bad input: a slot name, task, TTL or option that is
	// not usable. The message says the rule.
	ErrInvalid = errors.New("session: invalid input")

	// ErrHeld means the slot has a live session of this host (Join without
	// force). Returned wrapped in a *HeldError.
	ErrHeld = errors.New("session: slot is held")

	// ErrForeignHost means the slot's session belongs to another host: Join
	// (even forced), Resume, Commit and Close refuse it. Returned wrapped in
	// a *HeldError.
	ErrForeignHost = errors.New("session: slot belongs to another host")

	// ErrUndecodable means the slot holds a record that does not decode. It
	// is held by nobody-knows-who and never treated as free. Returned
	// wrapped in a *HeldError.
	ErrUndecodable = errors.New("session: record does not decode")

	// ErrGateBusy means another process of this host is joining the slot
	// (the host-local gate is held). It wraps hostlocal.ErrLocked, whose
	// *LockedError names the holder.
	ErrGateBusy = errors.New("session: host gate busy")

	// ErrNotFound means the slot has no session and nothing shows it had
	// one recently.
	ErrNotFound = errors.New("session: no such session")

	// ErrLost means the caller's session is gone: it expired, was closed or
	// reaped, or another session (another fence) took the slot. Returned
	// wrapped in a *LostError.
	ErrLost = errors.New("session: session lost")
)

// HeldError says who holds a slot a caller could not take.
type HeldError struct {
	Slot string
	// Holder is the live session in the way; nil when its record does not
	// decode.
	Holder *Session
	// Revision of the record in the way.
	Revision uint64
	// Reason is ErrHeld, ErrForeignHost or ErrUndecodable.
	Reason error
	// Decode is the decoding error when Reason is ErrUndecodable.
	Decode error
	// Waited is how long Join waited for the slot (WithWait) before it gave
	// up; 0 when it did not wait.
	Waited time.Duration
}

func (e *HeldError) Error() string {
	var s string
	switch {
	case e.Holder == nil:
		s = fmt.Sprintf("slot %s holds a record that does not decode (revision %d): %v; it is treated as held", e.Slot, e.Revision, e.Decode)
	case errors.Is(e.Reason, ErrForeignHost):
		s = fmt.Sprintf("slot %s belongs to host %s (%s)", e.Slot, e.Holder.Host, describe(e.Holder, false))
	default:
		s = fmt.Sprintf("slot %s is held on this host (%s)", e.Slot, describe(e.Holder, false))
	}
	if e.Waited > 0 {
		s += fmt.Sprintf("; waited %s for it", e.Waited)
	}
	return s
}

// Unwrap lets errors.Is match the reason.
func (e *HeldError) Unwrap() error { return e.Reason }

// How a session was lost.
const (
	LostExpired = "expired"
	LostClosed  = "closed"
	LostTaken   = "taken over"
	LostGone    = "gone"
	// LostUnrenewed: renewals failed until the local deadline, shorter than
	// the TTL; the server may expire the session any moment, so its holder
	// must stop acting as if it held it.
	LostUnrenewed = "not renewed in time"
)

// LostError says how a caller's session was lost.
type LostError struct {
	Slot  string
	Fence uint64
	// How is one of LostExpired, LostClosed, LostTaken, LostGone.
	How string
	// At is the server time of the event, when known.
	At time.Time
	// Now is the session holding the slot now (LostTaken), if it decodes.
	Now *Session
}

func (e *LostError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "session %s", e.Slot)
	if e.Fence != 0 {
		fmt.Fprintf(&b, " (fence %d)", e.Fence)
	}
	fmt.Fprintf(&b, " was %s", e.How)
	if !e.At.IsZero() {
		fmt.Fprintf(&b, " at %s", e.At.UTC().Format(time.RFC3339))
	}
	if e.Now != nil {
		fmt.Fprintf(&b, "; the slot is now held by %s", describe(e.Now, true))
	}
	return b.String()
}

// Unwrap lets errors.Is match ErrLost.
func (e *LostError) Unwrap() error { return ErrLost }

func describe(s *Session, withHost bool) string {
	parts := []string{fmt.Sprintf("pid %d", s.PID)}
	if withHost && s.Host != "" {
		parts = append(parts, "host "+s.Host)
	}
	if s.TaskID != "" {
		parts = append(parts, "task "+s.TaskID)
	}
	if s.AgentID != "" {
		parts = append(parts, "agent "+s.AgentID)
	}
	parts = append(parts, fmt.Sprintf("fence %d", s.Fence))
	if !s.StartedAt.IsZero() {
		parts = append(parts, "since "+s.StartedAt.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, ", ")
}
