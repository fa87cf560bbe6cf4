package lease

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrInvalid means bad input: a key, TTL or option that is not usable.
	ErrInvalid = errors.New("lease: invalid input")

	// ErrHeld means the lease is held by another instance. Returned wrapped
	// in a *HeldError naming the holder.
	ErrHeld = errors.New("lease: held by another instance")

	// ErrNotFound means the key has no lease.
	ErrNotFound = errors.New("lease: no such lease")

	// ErrLost means the caller's lease is gone: expired, released by
	// someone else, taken, handed over, or not renewed in time. Returned
	// wrapped in a *LostError.
	ErrLost = errors.New("lease: lease lost")

	// ErrUndecodable means the key holds a record that does not decode: it
	// is held by nobody-knows-who, never free.
	ErrUndecodable = errors.New("lease: record does not decode")

	// ErrReleased means the holder itself ended the lease: released,
	// handed over or orphaned it. Lease.Err returns it after those.
	ErrReleased = errors.New("lease: released by its holder")

	// ErrNotEligible means this candidate lacks a capability the election
	// requires: it may follow, never lead.
	ErrNotEligible = errors.New("lease: not eligible to lead")

	// ErrNoLeader means the election has no leader now.
	ErrNoLeader = errors.New("lease: no leader")

	// ErrYield means the leader is to hand leadership over: a transfer
	// request named another candidate, or one preferred by score is
	// present. Lead ends its work's context with it, wrapped in a
	// *YieldError, before it hands over.
	ErrYield = errors.New("lease: leadership to be handed over")

	// ErrNoCandidate means a transfer named an instance that is not a live,
	// eligible candidate.
	ErrNoCandidate = errors.New("lease: no such candidate")
)

// HeldError names the holder of a lease the caller could not take.
type HeldError struct {
	Key string
	// Holder is the record in the way; nil if it does not decode.
	Holder   *Record
	Revision uint64
	// Reason is ErrHeld or ErrUndecodable.
	Reason error
	Decode error
}

func (e *HeldError) Error() string {
	if e.Holder == nil {
		return fmt.Sprintf("lease %s holds a record that does not decode (revision %d): %v; it is treated as held", e.Key, e.Revision, e.Decode)
	}
	h := e.Holder
	return fmt.Sprintf("lease %s is held by instance %s (host %s, pid %d, fence %d, since %s)",
		e.Key, h.Holder, h.Host, h.PID, h.Fence, h.AcquiredAt.UTC().Format(time.RFC3339))
}

// Unwrap lets errors.Is match the reason.
func (e *HeldError) Unwrap() error { return e.Reason }

// How a lease was lost.
const (
	LostExpired    = "expired"
	LostReleased   = "released by another"
	LostTaken      = "taken by another"
	LostHandedOver = "handed over"
	LostUnrenewed  = "not renewed in time"
	LostGone       = "gone"
)

// LostError says how a lease was lost.
type LostError struct {
	Key   string
	Fence uint64
	How   string
	// Now is the record holding the key now, if any.
	Now *Record
}

func (e *LostError) Error() string {
	s := fmt.Sprintf("lease %s (fence %d) was lost: %s", e.Key, e.Fence, e.How)
	if e.Now != nil {
		s += fmt.Sprintf("; now held by instance %s (host %s, fence %d)", e.Now.Holder, e.Now.Host, e.Now.Fence)
	}
	return s
}

// Unwrap lets errors.Is match ErrLost.
func (e *LostError) Unwrap() error { return ErrLost }

// YieldError names the candidate a leader is to hand over to.
type YieldError struct {
	Key string // the agent key
	To  string // the instance to lead next
}

func (e *YieldError) Error() string {
	return fmt.Sprintf("leadership of %s is to be handed over to %s", e.Key, e.To)
}

// Unwrap lets errors.Is match ErrYield.
func (e *YieldError) Unwrap() error { return ErrYield }
