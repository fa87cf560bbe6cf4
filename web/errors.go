package web

import (
	"errors"

	"github.com/batonhq/baton/view"
)

// Sentinel errors. The API answers each with its HTTP status (statusOf).
var (
	// ErrInvalid is bad input: a bad listen address, a request the API
	// cannot parse. HTTP 400. (It is view.ErrInvalid, which the CLI maps.)
	ErrInvalid = view.ErrInvalid
	// ErrUnsafeListen is a listen address beyond loopback with neither a
	// token nor read-only mode: anyone who can reach it could act on the
	// cluster. (It is view.ErrUnsafeListen, which the CLI maps.)
	ErrUnsafeListen = view.ErrUnsafeListen
	// ErrReadOnly is an action asked of a read-only dashboard. HTTP 403.
	ErrReadOnly = errors.New("web: the dashboard is read-only")
	// ErrUnauthorized is a request without the dashboard's token. HTTP 401.
	ErrUnauthorized = errors.New("web: missing or wrong token")
	// ErrNotFound is an agent key, queue or task the cluster does not
	// have. HTTP 404.
	ErrNotFound = errors.New("web: not found")
)
