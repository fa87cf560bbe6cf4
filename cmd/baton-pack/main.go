// Command baton-pack writes the baton file that `make build` makes: the client
// program followed by the full program (internal/carry, ADR 0030).
//
//	go run ./cmd/baton-pack -o bin/baton CLIENT FULL
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/batonhq/baton/internal/carry"
)

func main() {
	out := flag.String("o", "", "the file to write (replaced atomically)")
	flag.Parse()
	if *out == "" || flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: pack -o OUT CLIENT FULL")
		os.Exit(2)
	}
	if err := carry.Pack(*out, flag.Arg(0), flag.Arg(1)); err != nil {
		fmt.Fprintln(os.Stderr, "pack:", err)
		os.Exit(1)
	}
}
