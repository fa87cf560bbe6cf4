package mcpserver

import "errors"

var (
	// ErrNotHeld means a tool named a slot this server does not hold.
	ErrNotHeld = errors.New("mcpserver: slot not held by this agent")
	// ErrClosePending means a release could not reach the baton server;
	// the server goes on trying in the background.
	ErrClosePending = errors.New("mcpserver: release pending")
	// ErrInvalid means arguments a schema cannot check were wrong (a TTL
	// that is not whole seconds, a slot name baton refuses).
	ErrInvalid = errors.New("mcpserver: invalid arguments")
)
