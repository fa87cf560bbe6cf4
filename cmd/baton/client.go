//go:build baton_client

package main

import (
	"os"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/root"
	"github.com/batonhq/baton/internal/carry"
)

// program makes f the client program's: the verbs it does not link go to
// the full program packed after it (internal/carry). Built alone, the
// client runs every other verb, and says how to build the file for those.
func program(f *cmdutil.Factory) []root.FullVerb {
	f.Full = func() error { return carry.Exec(os.Args, os.Environ()) }
	return nil
}
