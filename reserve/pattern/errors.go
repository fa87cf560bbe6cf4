package pattern

import "errors"

// ErrBadPattern means a pattern or path is not usable; the error that
// wraps it says why and what to do.
var ErrBadPattern = errors.New("pattern: bad pattern")
