// Command baton keeps fleets of coding agents from stepping on each other:
// one holder per slot, one spawn at a time per host, across hosts. See
// `baton --help`.
//
// This is the full program: every verb in one process. `make build` packs
// it behind the client program (cmd/baton/internal/client), which starts
// faster and hands it only the verbs that need what it links (ADR 0030);
// built alone, as `go install` does, it is a complete baton.
package main

import (
	"context"
	"os"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/full"
	"github.com/batonhq/baton/cmd/baton/internal/root"
)

func main() {
	f := &cmdutil.Factory{IO: cmdutil.System(), Getenv: os.Getenv}
	full.Setup(f)
	os.Exit(int(root.Main(context.Background(), f, os.Args[1:], full.Verbs())))
}
