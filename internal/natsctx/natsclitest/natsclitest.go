// Package natsclitest runs the real nats CLI for tests, so that the
// contexts baton reads are the ones the nats CLI writes. The CLI is built
// from its module by scripts/install-natscli.sh into .tools/ the first time
// a test asks for it.
package natsclitest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Version is the nats CLI the tests save contexts with; the install script
// names the same.
const Version = "v0.5.0"

// install builds the CLI once per test binary; its result is kept so that
// a failed install is tried once, not once per test.
var install = sync.OnceValues(func() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, ".tools", "nats-"+Version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "install-natscli.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil {
		return "", fmt.Errorf("scripts/install-natscli.sh: %w: %s", err, strings.TrimSpace(lastLines(stderr.String(), 5)))
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("scripts/install-natscli.sh left no %s", bin)
	}
	return bin, nil
})

// Path returns the nats CLI, installing it if needed. When it cannot be
// installed the test is skipped, saying why, or fails under CI (CI set),
// where a skip would hide the missing install.
func Path(tb testing.TB) string {
	tb.Helper()
	bin, err := install()
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("the nats CLI %s is needed and could not be installed: %v", Version, err)
		}
		tb.Skipf("the nats CLI %s could not be installed (%v); run scripts/install-natscli.sh where the Go module proxy is reachable", Version, err)
	}
	return bin
}

// Save runs `nats context save NAME ARGS...` with configHome as
// XDG_CONFIG_HOME (and a HOME of its own, and no NATS_ variables, so that
// nothing of this user's or environment's leaks in) and returns the file it
// wrote.
func Save(tb testing.TB, configHome, name string, args ...string) string {
	tb.Helper()
	if out, err := Run(tb, configHome, append([]string{"context", "save", name}, args...)...); err != nil {
		tb.Fatalf("nats context save %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	path := filepath.Join(configHome, "nats", "context", name+".json")
	if _, err := os.Stat(path); err != nil {
		tb.Fatalf("nats context save %s wrote no %s: %v", name, path, err)
	}
	return path
}

// Run runs the nats CLI with args as Save does and returns its combined
// output.
func Run(tb testing.TB, configHome string, args ...string) ([]byte, error) {
	tb.Helper()
	cmd := exec.Command(Path(tb), args...)
	cmd.Env = []string{"HOME=" + tb.TempDir(), "XDG_CONFIG_HOME=" + configHome}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "HOME" && name != "XDG_CONFIG_HOME" && !strings.HasPrefix(name, "NATS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd.CombinedOutput()
}

// moduleRoot is the directory of baton's go.mod, above the working
// directory (a test runs in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/batonhq/baton\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("baton's go.mod is not above the working directory")
		}
		dir = parent
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
