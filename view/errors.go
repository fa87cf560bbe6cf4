package view

import "errors"

// The errors of the dashboard that the CLI maps to exit codes. They live
// here, beside the shapes the CLI and the dashboard share, so that a client
// process maps them without linking the dashboard (package web, with
// client_golang); web's ErrInvalid and ErrUnsafeListen are these.
var (
	// ErrInvalid is bad input: a bad listen address, a request the API
	// cannot parse. HTTP 400.
	ErrInvalid = errors.New("web: invalid input")
	// ErrUnsafeListen is a listen address beyond loopback with neither a
	// token nor read-only mode: anyone who can reach it could act on the
	// cluster.
	ErrUnsafeListen = errors.New("web: listening beyond loopback needs a token or read-only mode")
)
