// Command client is baton's client program: every verb but those that
// link the NATS server, the dashboard, the MCP SDK or the --metrics server,
// which it hands to the full program (cmd/baton) that `make build` packs
// into the same file after it (internal/carry, ADR 0030). Built alone it
// runs every other verb, and says how to build the file for those.
package main

import (
	"context"
	"os"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/root"
	"github.com/batonhq/baton/internal/carry"
)

func main() {
	f := &cmdutil.Factory{IO: cmdutil.System(), Getenv: os.Getenv}
	f.Full = func() error { return carry.Exec(os.Args, os.Environ()) }
	os.Exit(int(root.Main(context.Background(), f, os.Args[1:], nil)))
}
