package natsctx

import "errors"

var (
	// ErrNotFound means there is no context of that name: its file does
	// not exist, or no configuration directory could be found to look in.
	// Load returns it.
	ErrNotFound = errors.New("natsctx: no such context")

	// ErrInvalidName means a context name is empty or could name a file
	// outside the context directory ("..", "/" or "\"). Load returns it.
	ErrInvalidName = errors.New("natsctx: invalid context name")

	// ErrMalformed means a context file is not a JSON object of the
	// context's fields. Load returns it.
	ErrMalformed = errors.New("natsctx: malformed context file")

	// ErrCredential means a credential the context names could not be
	// read or used: an unknown reference scheme, a variable that is not
	// set, a failed op or nsc command, undecodable material. Load (for
	// the legacy nsc field) and NATSOptions return it.
	ErrCredential = errors.New("natsctx: cannot read a credential")

	// ErrUnsupported means the context asks for something that cannot be
	// done here: a Windows certificate store, or a TLS file named by a
	// reference other than a path. NATSOptions returns it.
	ErrUnsupported = errors.New("natsctx: unsupported setting")
)
