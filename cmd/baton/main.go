// Command baton keeps fleets of coding agents from stepping on each other:
// one holder per slot, one actor per shared identity, one spawn at a time
// per host, across hosts. See `baton --help`.
//
// This is the program users run. Built as it is (go build, go install) it
// is the full program, a complete baton: every verb in one process. `make build` builds it a
// second time with the baton_client tag, as the client program: every verb
// but up, ui, mcp and --metrics, which link the NATS server, the
// dashboard, the MCP SDK and client_golang; it starts faster, and passes
// those four to the full program, which cmd/baton-pack packs after it
// in the same file (ADR 0030).
package main

import (
	"context"
	"os"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/root"
)

func main() {
	f := &cmdutil.Factory{IO: cmdutil.System(), Getenv: os.Getenv}
	os.Exit(int(root.Main(context.Background(), f, os.Args[1:], program(f))))
}
