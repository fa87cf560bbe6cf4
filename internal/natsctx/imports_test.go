package natsctx_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports_NothingBeyondNATSGo: every client verb with --context links
// this package, so it links nothing beyond nats.go, nkeys and x/net/proxy
// (ADR 0033): not jsm.go, whose package initialisation every process paid
// (ADR 0028), nor anything only the full program carries (ADR 0030).
func TestImports_NothingBeyondNATSGo(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	allowed := []string{
		"github.com/batonhq/baton/internal/natsctx",
		"github.com/nats-io/nats.go", "github.com/nats-io/nkeys", "github.com/nats-io/nuid",
		"github.com/klauspost/compress/",               // nats.go's
		"golang.org/x/crypto/", "golang.org/x/sys/cpu", // nkeys'
		"golang.org/x/net/proxy", "golang.org/x/net/internal/socks",
	}
	for _, p := range strings.Fields(string(out)) {
		ok := false
		for _, a := range allowed {
			ok = ok || p == a || strings.HasPrefix(p, a+"/") || (strings.HasSuffix(a, "/") && strings.HasPrefix(p, a))
		}
		if !ok {
			t.Errorf("natsctx links %s; the client program pays for every package it links at each start", p)
		}
	}
}
