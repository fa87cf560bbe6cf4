package natsctx_test

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/natsctx"
	"github.com/batonhq/baton/internal/natsctx/natsclitest"
)

func TestLoad_MissingContextNamesTheFileAndTheFix(t *testing.T) {
	home := configHome(t)
	natsclitest.Save(t, home, "other")
	_, err := natsctx.Load(t.Context(), "nope")
	want := filepath.Join(home, "nats", "context", "nope.json")
	if !errors.Is(err, natsctx.ErrNotFound) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "nats context save nope") {
		t.Errorf("a missing context: %v; want ErrNotFound naming %s and how to save it", err, want)
	}
}

func TestLoad_WithoutXDGConfigHomeLooksInTheUsersHome(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "")
	u, err := user.Current()
	if err != nil {
		t.Skip("no current user:", err)
	}
	// The password database's home, as the nats CLI looks, not $HOME.
	t.Setenv("HOME", t.TempDir())
	dir, err := natsctx.Dir()
	if want := filepath.Join(u.HomeDir, ".config", "nats", "context"); err != nil || dir != want {
		t.Errorf("Dir() = %q, %v; want %q", dir, err, want)
	}
}

func TestLoad_MalformedFile(t *testing.T) {
	home := configHome(t)
	path := natsclitest.Save(t, home, "c", "--server", "nats://127.0.0.1:4222")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"truncated": string(good[:len(good)/2]),
		"empty":     "",
		"wrongtype": strings.Replace(string(good), `"url": "nats://127.0.0.1:4222"`, `"url": 4222`, 1),
		"array":     "[]",
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := natsctx.Load(t.Context(), "c")
			if !errors.Is(err, natsctx.ErrMalformed) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "nats context save c") {
				t.Errorf("%s: %v; want ErrMalformed naming the file and how to fix it", name, err)
			}
		})
	}
}

func TestLoad_UnreadableFileIsNotMissing(t *testing.T) {
	home := configHome(t)
	if err := os.MkdirAll(filepath.Join(home, "nats", "context", "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := natsctx.Load(t.Context(), "dir")
	if err == nil || errors.Is(err, natsctx.ErrNotFound) || errors.Is(err, natsctx.ErrMalformed) {
		t.Errorf("a context that is a directory: %v; want the read error", err)
	}
}

func TestLoad_RefusesNamesOutsideTheDirectory(t *testing.T) {
	configHome(t)
	for _, name := range []string{"", "..", "../x", "a/b", `a\b`, "x..y"} {
		if _, err := natsctx.Load(t.Context(), name); !errors.Is(err, natsctx.ErrInvalidName) {
			t.Errorf("Load(%q): %v, want ErrInvalidName", name, err)
		}
	}
}

// TestLoad_IgnoresUnknownFieldsAndCase: the file is read as the nats CLI
// reads it, with encoding/json: unknown keys are skipped and keys match
// without regard to case.
func TestLoad_IgnoresUnknownFieldsAndCase(t *testing.T) {
	home := configHome(t)
	writeFile(t, home, "nats/context/c.json", []byte(`{"URL": "nats://h:1", "Inbox_Prefix": "_I", "future_field": {"x": 1}}`))
	c, err := natsctx.Load(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if c.ServerURL() != "nats://h:1" || c.InboxPrefix != "_I" || c.Name != "c" {
		t.Errorf("url %q, inbox prefix %q, name %q", c.ServerURL(), c.InboxPrefix, c.Name)
	}
}

func TestLoad_PathsExpandTildeAndVariables(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Skip("no current user:", err)
	}
	t.Setenv("BATON_TEST_DIR", "/some/dir")
	for arg, want := range map[string]string{
		"~/u.creds":                 u.HomeDir + "/u.creds",
		"$BATON_TEST_DIR/u.creds":   "/some/dir/u.creds",
		"${BATON_TEST_DIR}/x/../u":  "/some/dir/x/../u",
		"$BATON_TEST_UNSET/u.creds": "/u.creds",
		"rel/u.creds":               "rel/u.creds",
	} {
		// Passed as one argument, not through a shell: the nats CLI saves
		// it as written.
		c := saved(t, "--creds", arg)
		if c.Creds != want {
			t.Errorf("creds %q saved: read as %q, want %q", arg, c.Creds, want)
		}
	}
	c := saved(t, "--nkey", "~/u.nk")
	if c.NKey != u.HomeDir+"/u.nk" {
		t.Errorf("nkey ~/u.nk read as %q", c.NKey)
	}
}

// TestLoad_RelativePathsOpenFromTheWorkingDirectory: a relative creds path
// is opened from the working directory of the process that connects, as
// by the nats CLI.
func TestLoad_RelativePathsOpenFromTheWorkingDirectory(t *testing.T) {
	u := newUser(t)
	wd := t.TempDir()
	writeFile(t, wd, "rel/u.creds", u.creds(t))
	c := saved(t, "--creds", "rel/u.creds")
	t.Chdir(wd)
	checkJWTAuth(t, options(t, c), u, true)
}

func TestLoad_TLSPathsExpand(t *testing.T) {
	home := configHome(t)
	t.Setenv("BATON_TEST_DIR", "/tls")
	writeFile(t, home, "nats/context/c.json", []byte(`{"cert": "$BATON_TEST_DIR/c.pem", "key": "${BATON_TEST_DIR}/k.pem", "ca": "~/ca.pem"}`))
	c, err := natsctx.Load(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	u, err := user.Current()
	if err != nil {
		t.Skip("no current user:", err)
	}
	if c.Cert != "/tls/c.pem" || c.Key != "/tls/k.pem" || c.CA != u.HomeDir+"/ca.pem" {
		t.Errorf("cert %q, key %q, ca %q", c.Cert, c.Key, c.CA)
	}
}

// TestLoad_EmbeddedCredentials: `nats context save --embed` puts the creds
// file's content in the context as a data: URI.
func TestLoad_EmbeddedCredentials(t *testing.T) {
	u := newUser(t)
	path := writeFile(t, t.TempDir(), "u.creds", u.creds(t))
	c := saved(t, "--creds", path, "--embed")
	if !strings.HasPrefix(c.Creds, "data:") {
		t.Fatalf("--embed saved creds %.30q..., want a data: URI", c.Creds)
	}
	checkJWTAuth(t, options(t, c), u, true)
	seed := writeFile(t, t.TempDir(), "u.nk", u.seed(t))
	c = saved(t, "--nkey", seed, "--embed")
	if o := options(t, c); o.Nkey != u.pub {
		t.Errorf("embedded nkey: the connection's nkey %q, want %q", o.Nkey, u.pub)
	}
}
