package carry

import "errors"

// Sentinel errors.
var (
	// ErrNotCarried is a file that carries no full program: a client
	// program built alone (`go build` of it), not by `make build`.
	ErrNotCarried = errors.New("carry: this file carries no full program; build baton with `make build`")
	// ErrCorrupt is a file whose trailer or carried program does not add
	// up: a truncated or altered file. Install it again.
	ErrCorrupt = errors.New("carry: the file is damaged; install baton again")
)
