// Package cmdutil holds what every verb of the baton CLI shares: the
// factory of clients and managers built from the global flags, the I/O
// streams, the JSON printer, and the one mapping from errors to exit codes
// and messages.
package cmdutil

import (
	"io"
	"os"
)

// IOStreams are a command's standard streams. Data goes to Out, chatter and
// errors to ErrOut.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// System returns the process's own streams.
func System() *IOStreams {
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}
