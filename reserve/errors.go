package reserve

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrInvalid means bad input: a space, pattern, TTL or option that is
	// not usable.
	ErrInvalid = errors.New("reserve: invalid input")

	// ErrHeld means a request's patterns overlap reservations in its way.
	// Returned wrapped in a *HeldError naming them.
	ErrHeld = errors.New("reserve: paths reserved by another")

	// ErrLost means a reservation is gone: it expired, its holder was
	// found dead, it was released by someone else, or it was not renewed
	// in time. Returned wrapped in a *LostError.
	ErrLost = errors.New("reserve: reservation lost")

	// ErrReleased means the reservation's holder released it.
	ErrReleased = errors.New("reserve: reservation released")

	// ErrNoReservation means the space holds no reservation of that id:
	// it was released, or it expired.
	ErrNoReservation = errors.New("reserve: no such reservation")

	// ErrSpaceFull means a space's record would grow larger than the
	// server takes in one message.
	ErrSpaceFull = errors.New("reserve: space full")

	// ErrUndecodable means a space's record does not decode. Its paths
	// are held by nobody-knows-who: never free.
	ErrUndecodable = errors.New("reserve: record does not decode")
)

// invalidError is bad input that a lower package described: its message
// alone, matching ErrInvalid too.
type invalidError struct{ err error }

func (e invalidError) Error() string   { return e.err.Error() }
func (e invalidError) Unwrap() []error { return []error{ErrInvalid, e.err} }

// Conflict is one reservation in a request's way: which of the request's
// patterns meets which of its own.
type Conflict struct {
	// Pattern is the request's pattern in the way, and Theirs the
	// reservation's pattern it overlaps.
	Pattern string `json:"pattern"`
	Theirs  string `json:"theirs"`
	// Holder is the reservation in the way: held, or waiting in line
	// before the request (Holder.Waiting).
	Holder Entry `json:"holder"`
	// Age is how long it has been held (or waiting) at the decision.
	Age time.Duration `json:"age"`
}

// HeldError says why a request was not granted: every reservation in its
// way.
type HeldError struct {
	Space     string
	Shared    bool
	Conflicts []Conflict
	// Waited is true when the request waited in line and its wait ended
	// (its context) before its turn came.
	Waited bool
}

func (e *HeldError) Error() string {
	var b strings.Builder
	mode := "exclusively"
	if e.Shared {
		mode = "shared"
	}
	fmt.Fprintf(&b, "reserve: %s: ", e.Space)
	for i, c := range e.Conflicts {
		if i > 0 {
			b.WriteString("; ")
		}
		how := "reserved exclusively"
		switch {
		case c.Holder.Waiting:
			how = "waited for first"
		case c.Holder.Shared:
			how = "reserved shared"
		}
		fmt.Fprintf(&b, "%s is %s by %s as %s, for %s", c.Pattern, how, describe(&c.Holder), c.Theirs, roundAge(c.Age))
	}
	if e.Waited {
		fmt.Fprintf(&b, "; the wait to reserve %s ended first", mode)
	}
	b.WriteString("; nothing was reserved")
	return b.String()
}

func (e *HeldError) Unwrap() error { return ErrHeld }

// heldError makes the refusal of req from its blockers, at decision time d.
func heldError(space string, req *request, bs []blocker, d time.Time, waited bool) *HeldError {
	he := &HeldError{Space: space, Shared: req.cfg.shared, Waited: waited}
	for _, b := range bs {
		age := time.Duration(0)
		if !b.entry.Since.IsZero() && d.After(b.entry.Since) {
			age = d.Sub(b.entry.Since)
		}
		he.Conflicts = append(he.Conflicts, Conflict{Pattern: req.pats[b.mine].String(), Theirs: b.entry.Patterns[b.theirs], Holder: b.entry.bare(), Age: age})
	}
	return he
}

// LostError says which reservation was lost, and why.
type LostError struct {
	Space string
	ID    string
	Cause error
}

func (e *LostError) Error() string {
	return fmt.Sprintf("reserve: %s: reservation %s lost: %v", e.Space, e.ID, e.Cause)
}

func (e *LostError) Unwrap() []error { return []error{ErrLost, e.Cause} }

// roundAge rounds an age for people: to the millisecond under a second, to
// the second above.
func roundAge(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
