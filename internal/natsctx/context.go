// Package natsctx reads the contexts the nats CLI saves (`nats context
// save`), so that `--context NAME` reaches the server the nats CLI reaches,
// with the same credentials. Load reads one named context's file;
// NATSOptions turns the fields that shape a connection into nats.go options,
// in the nats CLI's order and with its rules for paths and credential
// references (file://, env://, data:, op://, nsc://).
//
// It only reads: contexts are saved, listed and selected with the nats CLI.
// A context is found by its name alone; the context the nats CLI has
// selected plays no part. Fields that do not shape a connection
// (description, color_scheme, jetstream_event_prefix) are ignored, and the
// JetStream domain and API prefix are read for the caller to act on.
package natsctx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
)

// Context is one saved nats CLI context: the fields of its file that baton
// reads. Path fields (Creds, NKey, Cert, Key, CA) hold what the file says
// with environment variables and a leading ~ expanded.
type Context struct {
	// Name is the context's name; Path the file it was read from.
	Name string `json:"-"`
	Path string `json:"-"`

	// URL is the server URL or comma-separated list; see ServerURL.
	URL string `json:"url"`

	// Credentials. At most one of User (with Password), Creds, NKey and
	// UserJWT (with UserSeed) is used, in that order; Token is sent
	// beside any of them. Password, Token, UserJWT and UserSeed are the
	// value itself unless they are a reference (env://NAME, file://PATH,
	// data:;base64,..., op://..., nsc://...); Creds and NKey are a path
	// or a reference.
	User     string `json:"user"`
	Password string `json:"password"`
	Token    string `json:"token"`
	Creds    string `json:"creds"`
	NKey     string `json:"nkey"`
	UserJWT  string `json:"user_jwt"`
	UserSeed string `json:"user_seed"`

	// TLS: a client certificate (used only when both Cert and Key are
	// set), the CA that verifies the server, and whether the TLS
	// handshake comes before the server's greeting.
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	CA       string `json:"ca"`
	TLSFirst bool   `json:"tls_first"`

	// SocksProxy is a SOCKS5 proxy URL to dial the server through.
	SocksProxy string `json:"socks_proxy"`

	// InboxPrefix is the subject prefix of the connection's reply inboxes.
	InboxPrefix string `json:"inbox_prefix"`

	// JSDomain and JSAPIPrefix address JetStream in another domain or
	// account; reading them is the caller's choice to honour or refuse.
	JSDomain    string `json:"jetstream_domain"`
	JSAPIPrefix string `json:"jetstream_api_prefix"`

	// WindowsCertStore names a Windows certificate store for TLS, which
	// baton cannot use: NATSOptions refuses a context that sets it.
	WindowsCertStore string `json:"windows_cert_store"`

	// NSC is the field older nats CLIs wrote for credentials from nsc
	// (today's write nsc://... into Creds). Load runs `nsc generate
	// profile` for it, which gives the credentials and the server URL.
	NSC string `json:"nsc"`

	nscCreds, nscURL string
}

// Dir is the directory the nats CLI keeps its contexts in:
// $XDG_CONFIG_HOME/nats/context, else nats/context under the .config
// directory of the user's home (as the password database has it).
func Dir() (string, error) {
	if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" {
		return filepath.Join(xdg, "nats", "context"), nil
	}
	u, err := user.Current()
	if err != nil {
		return "", err
	}
	if u.HomeDir == "" {
		return "", errors.New("the user has no home directory")
	}
	return filepath.Join(u.HomeDir, ".config", "nats", "context"), nil
}

// Load reads the context called name from Dir. It returns ErrInvalidName
// for a name that is empty or holds "..", "/" or "\", ErrNotFound when no
// such context is saved, and ErrMalformed when its file does not decode. A
// context with the legacy nsc field runs `nsc` under ctx; its failure is
// ErrCredential. Credential references are resolved later, by NATSOptions.
func Load(ctx context.Context, name string) (*Context, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	dir, err := Dir()
	if err != nil {
		return nil, fmt.Errorf("%w: %q: cannot find the nats configuration directory (%w); set XDG_CONFIG_HOME", ErrNotFound, name, err)
	}
	return LoadFile(ctx, filepath.Join(dir, name+".json"))
}

// LoadFile reads a context from the file at path, named after the file.
// It returns ErrNotFound when the file does not exist and ErrMalformed when
// it does not decode; otherwise as Load.
func LoadFile(ctx context.Context, path string) (*Context, error) {
	name := strings.TrimSuffix(filepath.Base(path), ".json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist; save it with 'nats context save %s'", ErrNotFound, path, name)
	}
	if err != nil {
		return nil, err
	}
	c := &Context{Name: name, Path: path}
	// encoding/json, as the nats CLI reads the file: keys match fields
	// without regard to case, and unknown keys are skipped.
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("%w: %s: %w; fix it, or save the context again with 'nats context save %s'", ErrMalformed, path, err, name)
	}
	c.Creds = expandPath(c.Creds)
	c.NKey = expandPath(c.NKey)
	c.Cert = expandPath(c.Cert)
	c.Key = expandPath(c.Key)
	c.CA = expandPath(c.CA)
	if c.NSC != "" {
		p, err := nscProfile(ctx, c.NSC)
		if err != nil {
			return nil, fmt.Errorf("%w: the nsc field: %w", ErrCredential, err)
		}
		c.nscCreds, c.nscURL = p.creds, p.url
	}
	return c, nil
}

// ServerURL is the URL to connect to: the context's, else the one the
// legacy nsc field gave, else nats.DefaultURL.
func (c *Context) ServerURL() string {
	switch {
	case c.URL != "":
		return c.URL
	case c.nscURL != "":
		return c.nscURL
	default:
		return nats.DefaultURL
	}
}

// credsRef is the creds reference in use: the field's, else the one the
// legacy nsc field gave.
func (c *Context) credsRef() string {
	if c.Creds != "" {
		return c.Creds
	}
	return c.nscCreds
}

// checkName refuses a name that is empty or could reach outside the
// context directory, the nats CLI's rule for context names.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", ErrInvalidName)
	case strings.Contains(name, ".."):
		return fmt.Errorf(`%w: %q must not contain ".."`, ErrInvalidName, name)
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf(`%w: %q must not contain "/" or "\"`, ErrInvalidName, name)
	}
	return nil
}

// expandPath expands environment variables ($NAME, ${NAME}) in path, then
// a leading ~ into the user's home directory, as the nats CLI does for the
// path fields. A ~ is replaced alone (~alice is not alice's home), and is
// left as it is when the user cannot be looked up. A relative path stays
// relative: it is opened from the working directory.
func expandPath(path string) string {
	path = os.ExpandEnv(path)
	if !strings.HasPrefix(path, "~") {
		return path
	}
	u, err := user.Current()
	if err != nil {
		return path
	}
	return u.HomeDir + path[1:]
}
