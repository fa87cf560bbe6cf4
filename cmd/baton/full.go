//go:build !baton_client

package main

import (
	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/full"
	"github.com/batonhq/baton/cmd/baton/internal/root"
)

// program makes f the full program's, and returns the verbs it links
// beyond the client's.
func program(f *cmdutil.Factory) []root.FullVerb {
	full.Setup(f)
	return full.Verbs()
}
