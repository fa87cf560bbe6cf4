package sem

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrInvalid means bad input: a name, max, weight, TTL or option that
	// is not usable.
	ErrInvalid = errors.New("sem: invalid input")

	// ErrNotFound means there is no semaphore of that name: create it
	// first (baton sem create NAME --max N).
	ErrNotFound = errors.New("sem: no such semaphore")

	// ErrExists means a semaphore of that name exists with another max.
	// Returned wrapped in an *ExistsError.
	ErrExists = errors.New("sem: semaphore exists with another max")

	// ErrFull means the semaphore has fewer free units than the weight
	// asked for. Returned wrapped in a *FullError naming the holders.
	ErrFull = errors.New("sem: not enough free units")

	// ErrLost means a permit is gone: one of its units expired, was freed
	// by someone else, or was not renewed in time. Returned wrapped in a
	// *LostError.
	ErrLost = errors.New("sem: permit lost")

	// ErrReleased means the permit's holder released it.
	ErrReleased = errors.New("sem: permit released")

	// ErrNoPermit means no unit of the semaphore names that permit: it was
	// released, or its units expired.
	ErrNoPermit = errors.New("sem: no such permit")

	// ErrUndecodable means a record of the semaphore does not decode. A
	// unit that does not decode is held by nobody-knows-who: never free.
	ErrUndecodable = errors.New("sem: record does not decode")
)

// errTicket is a waiter's ticket that does not decode.
var errTicket = fmt.Errorf("%w: a waiter's ticket", ErrUndecodable)

// ExistsError is the semaphore found in the way of a Create.
type ExistsError struct {
	Name    string
	Max     int
	PerHost bool // Max is each host's
}

func (e *ExistsError) Error() string {
	each := ""
	if e.PerHost {
		each = " on each host"
	}
	return fmt.Sprintf("sem: semaphore %s exists with max %d%s; its max never changes (choose another name)", e.Name, e.Max, each)
}

func (e *ExistsError) Unwrap() error { return ErrExists }

// FullError says why an acquire could not be served now.
type FullError struct {
	Name   string
	Max    int
	Weight int
	Free   int
	// Free is -1 for a waiter whose wait ended (its context) before its
	// turn came or its units were free.
	// Waiting is how many wait in line ahead of any newcomer.
	Waiting int
	// Holders are the permits holding units, as last seen.
	Holders []Holder
}

func (e *FullError) Error() string {
	var b strings.Builder
	if e.Free < 0 {
		return fmt.Sprintf("sem: %s: %d of its %d units asked, and the wait ended before they were free; see baton sem status %s", e.Name, e.Weight, e.Max, e.Name)
	}
	fmt.Fprintf(&b, "sem: %s has %d of %d units free, %d asked", e.Name, e.Free, e.Max, e.Weight)
	if e.Waiting > 0 {
		fmt.Fprintf(&b, ", %d waiting ahead", e.Waiting)
	}
	if n := len(e.Holders); n > 0 {
		h := e.Holders[0]
		fmt.Fprintf(&b, "; held by %d permit(s), e.g. %s (index %d, weight %d, host %s, pid %d)", n, h.Permit, h.Index, h.Weight, h.Host, h.PID)
	}
	b.WriteString("; wait with --wait, or see baton sem status " + e.Name)
	return b.String()
}

func (e *FullError) Unwrap() error { return ErrFull }

// LostError says how a permit was lost.
type LostError struct {
	Name   string
	Permit string
	Cause  error
}

func (e *LostError) Error() string {
	return fmt.Sprintf("sem: permit %s of %s lost: %v", e.Permit, e.Name, e.Cause)
}

func (e *LostError) Unwrap() []error { return []error{ErrLost, e.Cause} }
