package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
)

// ServerFile is the file in the state directory where `baton up` writes its
// server's URL.
const ServerFile = "server.json"

// Factory builds what verbs need from the global flags, lazily: a verb that
// fails on its arguments never connects.
type Factory struct {
	IO     *IOStreams
	Config Config
	Getenv func(string) string
	// RenewHook, if set before Sessions, Leases or Queues, is told of each
	// renewal their keepalives make (a verb's --metrics sets it).
	RenewHook func(key string, took time.Duration, err error)
	// ServeMetrics serves a holding process's --metrics: set by the full
	// program, nil in the client program (ADR 0030).
	ServeMetrics MetricsServer
	// Supervisor is the program that supervises the commands lead, run
	// and queue work start (its hidden verb __supervise): empty for this
	// program's own file.
	Supervisor string
	// Full, in the client program, passes this process's command line to
	// the full program for what the client does not link (the server, the
	// dashboard, --metrics, MCP): it replaces the process, keeping its pid
	// and streams, and returns only an error. Nil in the full program,
	// which runs everything itself.
	Full func() error

	state    *hostlocal.StateDir
	client   *kv.Client
	instance string

	traceOpened bool
	traceFile   *os.File
	tracer      kv.Tracer
	traceErr    error
}

// TraceEnv names the file to which every kv client of a baton command
// appends a JSON line per KV call and return (kv.NewJSONTracer), for the
// fault harness's linearizability check.
const TraceEnv = "BATON_KV_TRACE"

// Tracer is the tracer of $BATON_KV_TRACE, opened once (appending, created
// 0600, never through a symbolic link) and closed by Close; nil when the
// variable is not set.
func (f *Factory) Tracer() (kv.Tracer, error) {
	if f.traceOpened {
		return f.tracer, f.traceErr
	}
	f.traceOpened = true
	path := ""
	if f.Getenv != nil {
		path = f.Getenv(TraceEnv)
	}
	if path == "" {
		return nil, nil
	}
	file, err := openTraceFile(path)
	if err != nil {
		f.traceErr = Usagef("%s=%s: %v", TraceEnv, path, err)
		return nil, f.traceErr
	}
	f.traceFile, f.tracer = file, kv.NewJSONTracer(file)
	return f.tracer, nil
}

// StateDir opens (creating, mode 0700) the host-local state directory.
func (f *Factory) StateDir() (*hostlocal.StateDir, error) {
	if f.state != nil {
		return f.state, nil
	}
	dir := f.Config.StateDir
	if dir == "" {
		var err error
		if dir, err = hostlocal.DefaultStateDir(); err != nil {
			return nil, err
		}
	}
	sd, err := hostlocal.OpenStateDir(dir)
	if err != nil {
		return nil, err
	}
	f.state = sd
	return sd, nil
}

// ServerURL is the URL verbs connect to: --server, BATON_URL or NATS_URL;
// else the context's; else the one a running `baton up` of this state
// directory wrote; else kv.DefaultURL. It is empty when a context decides.
func (f *Factory) ServerURL() string {
	if f.Config.Server != "" || f.Config.Context != "" {
		return f.Config.Server
	}
	if sd, err := f.StateDir(); err == nil {
		if info, ok := RunningServer(sd.Path()); ok {
			return info.URL
		}
	}
	return kv.DefaultURL
}

// RunningServer returns what a `baton up` of the state directory dir wrote,
// if that process still runs. A server.json that is a symbolic link is not
// one baton wrote (it renames a file of its own there): it is ignored.
func RunningServer(dir string) (kv.ServerInfo, bool) {
	path := filepath.Join(dir, ServerFile)
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return kv.ServerInfo{}, false
	}
	info, err := kv.ReadServerInfo(path)
	if err != nil || info.URL == "" {
		return info, false
	}
	return info, hostlocal.Process{PID: info.PID, Start: info.PIDStart}.Alive()
}

// Client connects once and returns the same client after.
func (f *Factory) Client(ctx context.Context, natsOpts ...nats.Option) (*kv.Client, error) {
	if f.client != nil {
		return f.client, nil
	}
	if _, err := f.Tracer(); err != nil {
		return nil, err
	}
	opts := append([]kv.Option{kv.WithURL(f.ServerURL()), kv.WithName("baton")}, f.ConnectOptions()...)
	if len(natsOpts) > 0 {
		opts = append(opts, kv.WithNATSOptions(natsOpts...))
	}
	client, err := kv.Connect(ctx, opts...)
	if errors.Is(err, kv.ErrPermission) && !f.HasCredentials() && !urlHasUser(f.ServerURL()) {
		return nil, fmt.Errorf("%w: %w", ErrNoCredentials, err)
	}
	if err != nil {
		return nil, err
	}
	f.client = client
	return client, nil
}

// ErrNoCredentials marks a server that refused a connection made without
// credentials.
var ErrNoCredentials = errors.New("the server requires credentials and none were given")

// urlHasUser reports whether a URL of the list carries user information.
func urlHasUser(list string) bool {
	for _, p := range strings.Split(list, ",") {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}

// ConnectOptions are the global flags' connection options but the URL:
// timeout, context, credentials, TLS and inbox prefix.
func (f *Factory) ConnectOptions() []kv.Option {
	c := f.Config
	// nats.go prints asynchronous errors to stderr by default; a verb reports
	// what they caused in its one error line instead (LongLived adds its own
	// handler).
	opts := []kv.Option{kv.WithTimeout(c.Timeout), kv.WithNATSOptions(nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))}
	if c.Context != "" {
		opts = append(opts, kv.WithContext(c.Context))
	}
	if c.Creds != "" {
		opts = append(opts, kv.WithCredsFile(c.Creds))
	}
	if c.NKey != "" {
		opts = append(opts, kv.WithNKeyFile(c.NKey))
	}
	if c.User != "" {
		opts = append(opts, kv.WithUserPassword(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, kv.WithToken(c.Token))
	}
	if c.TLSCA != "" || c.TLSCert != "" {
		opts = append(opts, kv.WithTLS(c.TLSCA, c.TLSCert, c.TLSKey))
	}
	if c.Inbox != "" {
		opts = append(opts, kv.WithInboxPrefix(c.Inbox))
	}
	if t, err := f.Tracer(); err != nil {
		// Client reports it before connecting; a caller of ConnectOptions
		// alone (baton up) fails to connect with it.
		opts = append(opts, kv.WithNATSOptions(func(*nats.Options) error { return err }))
	} else if t != nil {
		opts = append(opts, kv.WithTracer(t))
	}
	return opts
}

// HasCredentials reports whether the global flags (or the environment)
// give any credentials: a context, creds, nkey, user, token or a client
// certificate.
func (f *Factory) HasCredentials() bool {
	c := f.Config
	return c.Context != "" || c.Creds != "" || c.NKey != "" || c.User != "" || c.Token != "" || c.TLSCert != ""
}

// Instance is this process's instance id: BATON_INSTANCE, else a fresh
// uuid.
func (f *Factory) Instance() string {
	if f.instance == "" {
		if f.instance = f.Getenv("BATON_INSTANCE"); f.instance == "" {
			f.instance = uuid.NewString()
		}
	}
	return f.instance
}

// Sessions returns a session manager of this host, prefix and state
// directory, connected.
func (f *Factory) Sessions(ctx context.Context, natsOpts ...nats.Option) (*session.Manager, error) {
	sd, err := f.StateDir()
	if err != nil {
		return nil, err
	}
	client, err := f.Client(ctx, natsOpts...)
	if err != nil {
		return nil, err
	}
	return session.NewManager(client,
		session.WithPrefix(f.Config.Prefix),
		session.WithHostID(f.Config.HostID),
		session.WithInstance(f.Instance()),
		session.WithStateDir(sd),
		session.WithPIDFiles(true),
		session.WithRenewHook(f.RenewHook))
}

// Queues returns the queues of this prefix and host, connected; their key
// locks are sessions of this host.
func (f *Factory) Queues(ctx context.Context, natsOpts ...nats.Option) (*queue.Queues, error) {
	m, err := f.Sessions(ctx, natsOpts...)
	if err != nil {
		return nil, err
	}
	return queue.New(m, queue.WithRenewHook(f.RenewHook))
}

// Leases returns the leases of this prefix and host, held as instance
// (empty: Instance()), connected; opts come after the defaults.
func (f *Factory) Leases(ctx context.Context, instance string, opts []lease.Option, natsOpts ...nats.Option) (*lease.Leases, error) {
	client, err := f.Client(ctx, natsOpts...)
	if err != nil {
		return nil, err
	}
	if instance == "" {
		instance = f.Instance()
	}
	return lease.New(client, append([]lease.Option{
		lease.WithPrefix(f.Config.Prefix),
		lease.WithHostID(f.Config.HostID),
		lease.WithInstance(instance),
		lease.WithRenewHook(f.RenewHook),
	}, opts...)...)
}

// Semaphores returns the semaphores of this prefix and host, connected;
// opts come after the defaults.
func (f *Factory) Semaphores(ctx context.Context, opts []sem.Option, natsOpts ...nats.Option) (*sem.Semaphores, error) {
	client, err := f.Client(ctx, natsOpts...)
	if err != nil {
		return nil, err
	}
	return sem.New(client, append([]sem.Option{sem.WithPrefix(f.Config.Prefix), sem.WithHostID(f.Config.HostID)}, opts...)...)
}

// Spaces returns the path reservation spaces of this prefix and host,
// connected; opts add to those.
func (f *Factory) Spaces(ctx context.Context, opts []reserve.Option, natsOpts ...nats.Option) (*reserve.Spaces, error) {
	client, err := f.Client(ctx, natsOpts...)
	if err != nil {
		return nil, err
	}
	return reserve.New(client, append([]reserve.Option{reserve.WithPrefix(f.Config.Prefix), reserve.WithHostID(f.Config.HostID)}, opts...)...)
}

// Limiters returns the rate limiters of this prefix, connected.
func (f *Factory) Limiters(ctx context.Context, natsOpts ...nats.Option) (*rate.Limiters, error) {
	client, err := f.Client(ctx, natsOpts...)
	if err != nil {
		return nil, err
	}
	return rate.New(client, rate.WithPrefix(f.Config.Prefix))
}

// LongLived are connection options for verbs that run for a while (run,
// status --watch): reconnect for as long as it takes, say so on stderr in
// the usual one-line form, and call notify (if not nil) with false when the
// connection is lost and true when it is back. nats.go's own asynchronous
// error messages are not printed, but for a permission violation.
func (f *Factory) LongLived(verb string, notify func(connected bool)) []nats.Option {
	say := func(format string, a ...any) {
		Fprintf(f.IO.ErrOut, "baton: %s: %s\n", verb, fmt.Sprintf(format, a...))
	}
	return []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // closed by baton itself
			}
			where := kv.RedactURL(f.ServerURL())
			if where == "" {
				where = "the server of context " + f.Config.Context
			}
			say("lost the connection to %s; reconnecting until it is back (Ctrl-C to stop)", where)
			if notify != nil {
				notify(false)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			say("reconnected to %s", kv.RedactURL(nc.ConnectedUrl()))
			if notify != nil {
				notify(true)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				say("%v; check the account's permissions", err)
			}
		}),
	}
}

// Close releases the connection, if any, and closes the trace file.
func (f *Factory) Close() {
	if f.client != nil {
		f.client.Close()
	}
	if f.traceFile != nil {
		_ = f.traceFile.Close()
		f.traceFile = nil
	}
}
