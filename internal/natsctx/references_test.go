package natsctx_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/natsctx"
)

// fakeCommand puts an executable script called name first on PATH.
func fakeCommand(t *testing.T, name, script string) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, name, []byte("#!/bin/sh\n"+script))
	if err := os.Chmod(filepath.Join(dir, name), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestReference_LiteralFields(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "token", []byte("from-a-file\r\n"))
	t.Setenv("BATON_TEST_SECRET", "from-the-env")
	for _, tc := range []struct{ arg, want string }{
		{"env://BATON_TEST_SECRET", "from-the-env"},
		{"ENV://BATON_TEST_SECRET", "from-the-env"},
		{"file://" + file, "from-a-file"},
		{"data:;base64,ZnJvbS1kYXRh", "from-data"},
		{"plain", "plain"},
		{"abc:def", "abc:def"},         // a scheme no resolver has: literal
		{"https://x/y", "https://x/y"}, // likewise
	} {
		c := saved(t, "--user", "alice", "--password", tc.arg)
		if o := options(t, c); o.Password != tc.want {
			t.Errorf("password %q: %q, want %q", tc.arg, o.Password, tc.want)
		}
		c = saved(t, "--user", tc.arg) // a token
		if o := options(t, c); o.Token != tc.want {
			t.Errorf("token %q: %q, want %q", tc.arg, o.Token, tc.want)
		}
	}
}

func TestReference_CredsAndNKey(t *testing.T) {
	u := newUser(t)
	dir := t.TempDir()
	credsFile := writeFile(t, dir, "u.creds", u.creds(t))
	seedFile := writeFile(t, dir, "u.nk", u.seed(t))
	t.Setenv("BATON_TEST_CREDS", string(u.creds(t)))
	t.Setenv("BATON_TEST_SEED", string(u.seed(t)))
	for _, arg := range []string{"file://" + credsFile, "env://BATON_TEST_CREDS", "op://vault/item/creds", "OP://vault/item/creds"} {
		fakeCommand(t, "op", `[ "$1 $2" = "read op://vault/item/creds" ] && exec cat '`+credsFile+`'; echo "unexpected: $*" >&2; exit 1`)
		checkJWTAuth(t, options(t, saved(t, "--creds", arg)), u, true)
	}
	for _, arg := range []string{"file://" + seedFile, "env://BATON_TEST_SEED"} {
		if o := options(t, saved(t, "--nkey", arg)); o.Nkey != u.pub {
			t.Errorf("nkey %q: %q, want %q", arg, o.Nkey, u.pub)
		}
	}
}

func TestReference_NSC(t *testing.T) {
	u := newUser(t)
	credsFile := writeFile(t, t.TempDir(), "u.creds", u.creds(t))
	fakeCommand(t, "nsc", `[ "$1 $2 $3" = "generate profile nsc://O/A/U" ] || { echo "unexpected: $*" >&2; exit 1; }
echo '{"user_creds": "`+credsFile+`", "operator": {"service": ["nats://n1:4222", "nats://n2:4222"]}}'`)
	checkJWTAuth(t, options(t, saved(t, "--creds", "nsc://O/A/U")), u, true)

	// Older nats CLIs saved the nsc field, which gives the URL too.
	home := configHome(t)
	writeFile(t, home, "nats/context/legacy.json", []byte(`{"nsc": "nsc://O/A/U"}`))
	c, err := natsctx.Load(t.Context(), "legacy")
	if err != nil {
		t.Fatal(err)
	}
	if c.ServerURL() != "nats://n1:4222,nats://n2:4222" {
		t.Errorf("the legacy nsc field's URL: %q", c.ServerURL())
	}
	checkJWTAuth(t, options(t, c), u, true)

	// Without nsc the context cannot be used, and says why.
	t.Setenv("PATH", t.TempDir())
	if _, err := natsctx.Load(t.Context(), "legacy"); !errors.Is(err, natsctx.ErrCredential) || !strings.Contains(err.Error(), "nsc is not on PATH") {
		t.Errorf("the nsc field without nsc: %v, want ErrCredential", err)
	}
}

func TestReference_Failures(t *testing.T) {
	t.Setenv("BATON_TEST_EMPTY", "")
	fakeCommand(t, "op", `echo "not signed in" >&2; exit 1`)
	for _, tc := range []struct {
		args []string
		want error
		says string
	}{
		{[]string{"--user", "a", "--password", "env://BATON_TEST_UNSET"}, natsctx.ErrCredential, "BATON_TEST_UNSET is not set"},
		{[]string{"--user", "env://BATON_TEST_EMPTY"}, natsctx.ErrCredential, "BATON_TEST_EMPTY is empty"},
		{[]string{"--user", "env://"}, natsctx.ErrCredential, "names no environment variable"},
		{[]string{"--user", "file:///nonexistent/token"}, natsctx.ErrCredential, "/nonexistent/token"},
		{[]string{"--creds", "https://x/u.creds"}, natsctx.ErrCredential, "https references are not supported"},
		{[]string{"--creds", "data:,abc"}, natsctx.ErrCredential, "must be base64"},
		{[]string{"--creds", "data:;base64"}, natsctx.ErrCredential, "needs a ','"},
		{[]string{"--creds", "data:;base64,!!"}, natsctx.ErrCredential, "illegal base64"},
		{[]string{"--creds", "data:;base64,bm90IGNyZWRz"}, natsctx.ErrCredential, "creds"},
		{[]string{"--nkey", "/nonexistent/u.nk"}, natsctx.ErrCredential, "/nonexistent/u.nk"},
		{[]string{"--creds", "op://v/i/f"}, natsctx.ErrCredential, "op read"},
		{[]string{"--jwt", "env://BATON_TEST_UNSET"}, natsctx.ErrCredential, "user_jwt"},
	} {
		c := saved(t, tc.args...)
		_, err := c.NATSOptions(t.Context())
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: %v; want %v saying %q", tc.args, err, tc.want, tc.says)
		}
	}
}

// TestReference_TLSFilesArePathsOnly: nats.go reads TLS material from
// files, so a TLS field with another reference is refused, not skipped.
func TestReference_TLSFilesArePathsOnly(t *testing.T) {
	home := configHome(t)
	for name, doc := range map[string]string{
		"cert": `{"cert": "op://v/i/cert", "key": "/k.pem"}`,
		"key":  `{"cert": "/c.pem", "key": "env://KEY"}`,
		"ca":   `{"ca": "data:;base64,eA=="}`,
	} {
		writeFile(t, home, "nats/context/"+name+".json", []byte(doc))
		c, err := natsctx.Load(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.NATSOptions(t.Context()); !errors.Is(err, natsctx.ErrUnsupported) || !strings.Contains(err.Error(), name+":") {
			t.Errorf("%s by reference: %v, want ErrUnsupported naming the field", name, err)
		}
	}
	// file:// is a path.
	ca := writeFile(t, t.TempDir(), "ca.pem", nil)
	writeFile(t, home, "nats/context/fileca.json", []byte(`{"ca": "file://`+ca+`"}`))
	c, err := natsctx.Load(t.Context(), "fileca")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NATSOptions(t.Context()); err != nil {
		t.Errorf("a file:// CA: %v", err)
	}
}
