package natsctx_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/batonhq/baton/internal/natsctx"
	"github.com/batonhq/baton/internal/natsctx/natsclitest"
)

// configHome makes a temporary XDG_CONFIG_HOME for the test, where Load
// looks and the nats CLI saves.
func configHome(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	return dir
}

// saved saves a context with the real nats CLI and loads it.
func saved(t *testing.T, args ...string) *natsctx.Context {
	t.Helper()
	home := configHome(t)
	natsclitest.Save(t, home, "c", args...)
	c, err := natsctx.Load(context.Background(), "c")
	if err != nil {
		t.Fatalf("load the context nats saved with %q: %v", args, err)
	}
	return c
}

// options applies the context's options to nats.go's defaults.
func options(t *testing.T, c *natsctx.Context) nats.Options {
	t.Helper()
	opts, err := c.NATSOptions(context.Background())
	if err != nil {
		t.Fatalf("NATSOptions: %v", err)
	}
	o := nats.GetDefaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			t.Fatalf("apply an option: %v", err)
		}
	}
	return o
}

// connect connects with the context's URL and options.
func connect(c *natsctx.Context) (*nats.Conn, error) {
	opts, err := c.NATSOptions(context.Background())
	if err != nil {
		return nil, err
	}
	return nats.Connect(c.ServerURL(), opts...)
}

// writeFile writes data to name in dir and returns its path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// natsUser is a user's nkey pair and a JWT for it signed by a new account.
type natsUser struct {
	kp  nkeys.KeyPair
	pub string
	jwt string
}

func newUser(t *testing.T) natsUser {
	t.Helper()
	acc, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	token, err := jwt.NewUserClaims(pub).Encode(acc)
	if err != nil {
		t.Fatal(err)
	}
	return natsUser{kp: kp, pub: pub, jwt: token}
}

func (u natsUser) seed(t *testing.T) []byte {
	t.Helper()
	s, err := u.kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// creds is the user's credentials file's content.
func (u natsUser) creds(t *testing.T) []byte {
	t.Helper()
	b, err := jwt.FormatUserConfig(u.jwt, u.seed(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkJWTAuth checks that o presents u's JWT and signs with u's key (or,
// when signs is false, signs nothing).
func checkJWTAuth(t *testing.T, o nats.Options, u natsUser, signs bool) {
	t.Helper()
	if o.UserJWT == nil || o.SignatureCB == nil {
		t.Fatalf("no JWT authentication set: UserJWT %v, SignatureCB %v", o.UserJWT != nil, o.SignatureCB != nil)
	}
	got, err := o.UserJWT()
	if err != nil || got != u.jwt {
		t.Errorf("the JWT presented: %.20q..., %v; want the user's", got, err)
	}
	nonce := []byte("a nonce")
	sig, err := o.SignatureCB(nonce)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	if !signs {
		if sig != nil {
			t.Errorf("a JWT without a seed signed the nonce")
		}
		return
	}
	if err := u.kp.Verify(nonce, sig); err != nil {
		t.Errorf("the signature is not the user's: %v", err)
	}
}
