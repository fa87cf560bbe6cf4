package web

import "errors"

// Sentinel errors. The API answers each with its HTTP status (statusOf).
var (
	// ErrInvalid is bad input: a bad listen address, a request the API
	// cannot parse. HTTP 400.
	ErrInvalid = errors.New("web: invalid input")
	// ErrUnsafeListen is a listen address beyond loopback with neither a
	// token nor read-only mode: anyone who can reach it could act on the
	// cluster.
	ErrUnsafeListen = errors.New("web: listening beyond loopback needs a token or read-only mode")
	// ErrReadOnly is an action asked of a read-only dashboard. HTTP 403.
	ErrReadOnly = errors.New("web: the dashboard is read-only")
	// ErrUnauthorized is a request without the dashboard's token. HTTP 401.
	ErrUnauthorized = errors.New("web: missing or wrong token")
	// ErrNotFound is an agent key, queue or task the cluster does not
	// have. HTTP 404.
	ErrNotFound = errors.New("web: not found")
)
