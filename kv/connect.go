package kv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/natsctx"
)

// DefaultURL is where Connect goes when no URL or context names a server.
const DefaultURL = "nats://127.0.0.1:4222"

// DefaultTimeout bounds each call to the server when no deadline is given.
const DefaultTimeout = 5 * time.Second

// Client is a connection to a NATS server with JetStream, the root handle of
// this package. It is safe for concurrent use.
type Client struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	pushJS  nats.JetStreamContext // watches use the push ordered consumer, as nats.go's KV does
	ownConn bool
	timeout time.Duration
	url     string // redacted

	// refusals makes calls the server refuses fail at once; nil on a
	// connection the caller made (NewClient).
	refusals *refusals

	// dropAnswers > 0 makes that many writes lose their answer after they
	// landed: fault injection for tests (see export_test.go).
	dropAnswers atomic.Int32
	// answerUnavailable > 0 makes that many writes land on the server but
	// be answered 503, as a leader that lost its leadership after proposing
	// a write its successor then commits (tests).
	answerUnavailable atomic.Int32
	// readsUnavailable > 0 makes that many reads be answered 503 (tests).
	readsUnavailable atomic.Int32
	// readRetries counts reads sent again after a transient answer, or
	// after one older than what the key is known to have had.
	readRetries atomic.Int64
	// inProcess > 0 makes that many writes be refused, unsent, as a
	// replicated stream's leader refuses a key's write while an earlier one
	// is in progress (tests).
	inProcess atomic.Int32
	// inProcessRetries counts writes sent again after such a refusal.
	inProcessRetries atomic.Int64
	// cluster is set once the connection has been to a server of a cluster
	// (it stays set: ConnectedClusterName is empty while reconnecting).
	cluster atomic.Bool
	// answerStale > 0 makes that many writes land on the server but be
	// answered as a deposed leader answers them: refused, its copy of the
	// key older than the revision expected (tests). refuseStale does the
	// same for writes it does not send.
	answerStale, refuseStale atomic.Int32

	trace *tracing // WithTracer; nil: none
}

// Option configures Connect or NewClient.
type Option func(*config) error

type config struct {
	url         string
	contextName string
	name        string
	timeout     time.Duration
	credsFile   string
	nkeyFile    string
	user        string
	password    string
	token       string
	tlsCA       string
	tlsCert     string
	tlsKey      string
	inboxPrefix string
	natsOpts    []nats.Option
	tracer      Tracer
}

// WithURL sets the server URL (a comma-separated list is allowed). Default:
// the context's URL, else DefaultURL.
func WithURL(u string) Option {
	return func(c *config) error { c.url = strings.TrimSpace(u); return nil }
}

// WithContext loads a nats CLI context by name (from
// $XDG_CONFIG_HOME/nats/context/NAME.json, else ~/.config/nats/context) for
// the URL, credentials, TLS, SOCKS proxy and inbox prefix; options given
// alongside it take precedence. A context that sets a JetStream domain or
// API prefix is refused (ErrInvalidConfig). Default: none.
func WithContext(name string) Option {
	return func(c *config) error { c.contextName = name; return nil }
}

// WithName sets the connection name the server shows. Default: "baton".
func WithName(name string) Option {
	return func(c *config) error { c.name = name; return nil }
}

// WithTimeout bounds connecting and each call that has no earlier deadline.
// Default: DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: timeout %s must be positive", ErrInvalidConfig, d)
		}
		c.timeout = d
		return nil
	}
}

// WithCredsFile authenticates with a NATS credentials file. Default: none.
func WithCredsFile(path string) Option {
	return func(c *config) error { c.credsFile = path; return nil }
}

// WithNKeyFile authenticates with an nkey seed file. Default: none.
func WithNKeyFile(path string) Option {
	return func(c *config) error { c.nkeyFile = path; return nil }
}

// WithUserPassword authenticates with a user and password. Default: none.
func WithUserPassword(user, password string) Option {
	return func(c *config) error { c.user, c.password = user, password; return nil }
}

// WithToken authenticates with a token. Default: none.
func WithToken(token string) Option {
	return func(c *config) error { c.token = token; return nil }
}

// WithTLS sets a CA file to verify the server, and a client certificate and
// key for mutual TLS; any may be empty. Default: the system roots, no client
// certificate.
func WithTLS(caFile, certFile, keyFile string) Option {
	return func(c *config) error {
		if (certFile == "") != (keyFile == "") {
			return fmt.Errorf("%w: a TLS client certificate needs both a cert and a key file", ErrInvalidConfig)
		}
		c.tlsCA, c.tlsCert, c.tlsKey = caFile, certFile, keyFile
		return nil
	}
}

// WithInboxPrefix sets the subject prefix of the connection's reply
// inboxes (replies and watches arrive on PREFIX.>), so that a server can give
// each user inboxes no other user may subscribe to. Default: the context's,
// else nats.go's _INBOX.
func WithInboxPrefix(prefix string) Option {
	return func(c *config) error {
		if prefix == "" || strings.ContainsAny(prefix, " \t\r\n*>") || strings.HasPrefix(prefix, ".") || strings.HasSuffix(prefix, ".") {
			return fmt.Errorf("%w: inbox prefix %q: use subject tokens without wildcards, e.g. _INBOX_alice", ErrInvalidConfig, prefix)
		}
		c.inboxPrefix = prefix
		return nil
	}
}

// WithNATSOptions passes further options to nats.Connect (reconnect policy,
// handlers...). They are applied last. Default: none.
func WithNATSOptions(opts ...nats.Option) Option {
	return func(c *config) error { c.natsOpts = append(c.natsOpts, opts...); return nil }
}

// Connect dials the server. It returns ErrUnavailable when the server cannot
// be reached, ErrPermission when it refuses the credentials and
// ErrInvalidConfig when the options or the context cannot be used; every
// message names the URL tried, never a secret. On the connection it makes,
// a call the server refuses fails at once with ErrPermission, and such a
// refusal is not passed on to an error handler given with WithNATSOptions
// (the call reports it); other asynchronous errors are. A request whose
// answer will not come is sent again at once instead of after half the
// timeout: when the connection is lost, when the server announces
// lame-duck mode (the client then moves at once to another server it
// knows; a lame-duck handler given with WithNATSOptions is still called),
// and when the stream of a bucket the client handles elects a new leader
// (see the package doc).
func Connect(ctx context.Context, opts ...Option) (*Client, error) {
	cfg := config{name: "baton", timeout: DefaultTimeout}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	var nopts []nats.Option
	serverURL := cfg.url
	if cfg.contextName != "" {
		nctx, err := natsctx.Load(ctx, cfg.contextName)
		if err != nil {
			return nil, fmt.Errorf("%w: nats context %q: %w", ErrInvalidConfig, cfg.contextName, err)
		}
		if nctx.JSDomain != "" || nctx.JSAPIPrefix != "" {
			return nil, fmt.Errorf("%w: nats context %q sets a JetStream domain or API prefix, which baton does not support; use a context without them, or --server", ErrInvalidConfig, cfg.contextName)
		}
		copts, err := nctx.NATSOptions(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: nats context %q: %w", ErrInvalidConfig, cfg.contextName, err)
		}
		nopts = append(nopts, copts...)
		if serverURL == "" {
			serverURL = nctx.ServerURL()
		}
	}
	if serverURL == "" {
		serverURL = DefaultURL
	}
	timeout := cfg.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	nopts = append(nopts, nats.Name(cfg.name), nats.Timeout(timeout))
	for _, f := range []struct{ flag, path string }{
		{"creds", cfg.credsFile}, {"nkey", cfg.nkeyFile}, {"TLS CA", cfg.tlsCA}, {"TLS cert", cfg.tlsCert}, {"TLS key", cfg.tlsKey},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return nil, fmt.Errorf("%w: %s file: %w", ErrInvalidConfig, f.flag, err)
		}
	}
	switch {
	case cfg.credsFile != "":
		nopts = append(nopts, nats.UserCredentials(cfg.credsFile))
	case cfg.nkeyFile != "":
		o, err := nats.NkeyOptionFromSeed(cfg.nkeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: nkey file %s: %w", ErrInvalidConfig, cfg.nkeyFile, err)
		}
		nopts = append(nopts, o)
	}
	if cfg.user != "" {
		nopts = append(nopts, nats.UserInfo(cfg.user, cfg.password))
	}
	if cfg.token != "" {
		nopts = append(nopts, nats.Token(cfg.token))
	}
	if cfg.tlsCA != "" {
		nopts = append(nopts, nats.RootCAs(cfg.tlsCA))
	}
	if cfg.tlsCert != "" {
		nopts = append(nopts, nats.ClientCert(cfg.tlsCert, cfg.tlsKey))
	}
	if cfg.inboxPrefix != "" {
		nopts = append(nopts, nats.CustomInboxPrefix(cfg.inboxPrefix))
	}
	nopts = append(nopts, cfg.natsOpts...)
	// Last, so that it wraps a lame-duck handler given in natsOpts.
	r := newRefusals()
	nopts = append(nopts, r.lameDuckOption())

	redacted := RedactURL(serverURL)
	if err := checkURLs(serverURL); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: connect to %s: %w", ErrUnavailable, redacted, err)
	}
	nc, err := nats.Connect(serverURL, nopts...)
	if err != nil {
		return nil, connectError(redacted, scrub(err, serverURL))
	}
	c, err := newClient(nc, cfg.timeout)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.ownConn = true
	c.url = redacted
	c.trace = newTracing(cfg.tracer)
	c.refusals = r
	c.refusals.install(nc)
	return c, nil
}

// NewClient wraps a connection the caller made and keeps owning: Close does
// not close it. Only WithTimeout and WithTracer apply. As with Connect, a call the server
// refuses fails at once with ErrPermission: NewClient wraps the
// connection's error handler, which still gets every asynchronous error but
// the refusals that failed one of this client's calls (each reported once,
// by that call). It wraps the disconnect handler too: a lost connection
// ends the requests in flight, which are sent again at once, as with
// Connect; the server's lame-duck mode is the caller's to act on
// (nats.LameDuckModeHandler, Conn.ForceReconnect). A handler set on the
// connection afterwards replaces the wrapper, and refused or cut-off calls
// then wait out their timeout.
func NewClient(nc *nats.Conn, opts ...Option) (*Client, error) {
	cfg := config{timeout: DefaultTimeout}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	c, err := newClient(nc, cfg.timeout)
	if err != nil {
		return nil, err
	}
	c.url = RedactURL(nc.ConnectedUrl())
	c.trace = newTracing(cfg.tracer)
	c.refusals = newRefusals()
	c.refusals.install(nc)
	return c, nil
}

func newClient(nc *nats.Conn, timeout time.Duration) (*Client, error) {
	// Writes sent ahead (Pipeline) whose answers never come are dropped
	// from the publisher's pending set after the client's timeout.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(timeout), jetstream.WithPublishAsyncMaxPending(4*pipelineWindow))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	pushJS, err := nc.JetStream()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	c := &Client{nc: nc, js: js, pushJS: pushJS, timeout: timeout}
	c.clustered()
	return c, nil
}

func connectError(u string, err error) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired),
		strings.Contains(strings.ToLower(err.Error()), "authorization violation"):
		return fmt.Errorf("%w: %s refused the credentials: %w", ErrPermission, u, err)
	case errors.Is(err, nats.ErrNoServers):
		return fmt.Errorf("%w: cannot reach %s: %w", ErrUnavailable, u, err)
	default:
		return fmt.Errorf("%w: connect to %s: %w", ErrUnavailable, u, err)
	}
}

// Conn is the underlying NATS connection.
func (c *Client) Conn() *nats.Conn { return c.nc }

// URL is the server URL with any credentials removed.
func (c *Client) URL() string { return c.url }

// Timeout is the bound applied to each call without an earlier deadline.
func (c *Client) Timeout() time.Duration { return c.timeout }

// Close closes the connection if Connect made it. It is idempotent.
func (c *Client) Close() {
	c.refusals.close()
	if c.ownConn {
		c.nc.Close()
	}
}

// callCtx bounds one substrate call by the client's timeout.
func (c *Client) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= c.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}

// checkURLs refuses a URL list that nats.go could not parse, without
// quoting it: its error would carry the raw URL, password included.
func checkURLs(list string) error {
	for i, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if !strings.Contains(p, "://") {
			p = "nats://" + p
		}
		if u, err := url.Parse(p); err != nil || u.Host == "" {
			return fmt.Errorf("%w: server URL %d of %q is not a valid URL (nats://[user:password@]host:port); if the password has special characters, percent-encode them",
				ErrInvalidConfig, i+1, RedactURL(list))
		}
	}
	return nil
}

// scrubbedError is an error whose message had secrets removed; it still
// matches what it wraps.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrub removes the user information of the URLs in list from err's message.
func scrub(err error, list string) error {
	msg := err.Error()
	for _, p := range strings.Split(list, ",") {
		if i, j := strings.Index(p, "://"), strings.LastIndex(p, "@"); i >= 0 && j > i+3 {
			msg = strings.ReplaceAll(msg, p[i+3:j], "***")
		}
	}
	if msg == err.Error() {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}

// RedactURL removes user information (passwords, tokens) from a URL or a
// comma-separated list of URLs, for messages and logs.
func RedactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		u, err := url.Parse(p)
		if err != nil || u.Host == "" {
			if at := strings.LastIndex(p, "@"); at >= 0 {
				p = "***" + p[at:]
			}
			parts[i] = p
			continue
		}
		hasUser := u.User != nil
		u.User = nil
		p = u.String()
		if hasUser {
			p = strings.Replace(p, "://", "://***@", 1) // url.User would escape the stars
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}
