package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// heavy are the packages only the full program links (ADR 0030).
var heavy = []string{
	"github.com/nats-io/nats-server/v2/server",
	"github.com/prometheus/client_golang/prometheus",
	"github.com/modelcontextprotocol/go-sdk/mcp",
	"github.com/batonhq/baton/web",
}

// deps lists what `go build -tags tags .` links.
func deps(t *testing.T, tags string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-tags", tags, "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	return strings.Fields(string(out))
}

// The client program links none of what makes the full program slow
// to start; built as go install builds it, baton links all of it.
func TestPrograms_WhatEachLinks(t *testing.T) {
	client, complete := deps(t, "baton_client"), deps(t, "")
	for _, p := range heavy {
		if slices.Contains(client, p) {
			t.Errorf("the client program (-tags baton_client) links %s", p)
		}
		if !slices.Contains(complete, p) {
			t.Errorf("baton built without tags does not link %s: it is not complete", p)
		}
	}
}
