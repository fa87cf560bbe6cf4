package carry

import (
	"errors"
	"fmt"
)

// Sentinel errors.
var (
	// ErrNotCarried is a file that carries no full program: a client
	// program built alone (`go build` of it), not by `make build`.
	ErrNotCarried = errors.New("carry: this file carries no full program; build baton with `make build`")
	// ErrCorrupt is a file whose trailer or carried program does not add
	// up: a truncated or altered file. Install it again.
	ErrCorrupt = errors.New("carry: the file is damaged; install baton again")
	// ErrUnsupported means this system lacks what starting the full
	// program needs (Windows has no exec to run it in the client's
	// process; only Linux has memory files). errors.Is(err,
	// errors.ErrUnsupported) holds for it as well.
	ErrUnsupported = fmt.Errorf("carry: %w", errors.ErrUnsupported)
)
