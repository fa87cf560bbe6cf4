// Command baton keeps fleets of coding agents from stepping on each other:
// one holder per slot, one spawn at a time per host, across hosts. See
// `baton --help`.
package main

import (
	"context"
	"os"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/root"
)

func main() {
	f := &cmdutil.Factory{IO: cmdutil.System(), Getenv: os.Getenv}
	os.Exit(int(root.Main(context.Background(), f, os.Args[1:])))
}
