package rate

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrInvalid means bad input: a name, limit, cost or option that is
	// not usable.
	ErrInvalid = errors.New("rate: invalid input")

	// ErrNotFound means there is no limiter of that name: create it first
	// (baton rate create NAME --limit N/PERIOD).
	ErrNotFound = errors.New("rate: no such limiter")

	// ErrExists means a limiter of that name exists with other limits.
	ErrExists = errors.New("rate: limiter exists with other limits")

	// ErrLimited means the take does not fit the limits now. Returned
	// wrapped in a *LimitedError saying when to try again.
	ErrLimited = errors.New("rate: over the limit")

	// ErrNoTake means Settle found no admitted take of that id still in
	// the limiter's record.
	ErrNoTake = errors.New("rate: no such take")

	// ErrUndecodable means the limiter's record does not decode.
	ErrUndecodable = errors.New("rate: record does not decode")
)

// LimitedError is a take refused for now.
type LimitedError struct {
	Name string
	Cost int64
	// RetryAfter is how long until the take would fit, if nothing else is
	// admitted meanwhile.
	RetryAfter time.Duration
}

func (e *LimitedError) Error() string {
	return fmt.Sprintf("rate: %s: a take of cost %d is over the limit now; retry after %s", e.Name, e.Cost, e.RetryAfter)
}

func (e *LimitedError) Unwrap() error { return ErrLimited }
