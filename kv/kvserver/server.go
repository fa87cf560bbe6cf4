// Package kvserver embeds a nats-server with JetStream: what `baton up` runs
// and what every test starts, optionally from a nats-server configuration
// file with its users, permissions and TLS (WithConfigFile).
//
// It is a package of its own, apart from kv, because linking nats-server
// costs every process its package initialisation: a client that only
// connects imports kv, never this (ADR 0030).
package kvserver

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/batonhq/baton/kv"
)

// DefaultListen is where Start listens for clients by default.
const DefaultListen = "127.0.0.1:4222"

// Server is an embedded nats-server with JetStream.
type Server struct {
	ns      *server.Server
	disk    *diskGuard
	once    sync.Once
	tempDir string // removed on Shutdown when Start made it
}

// Option configures Start.
type Option func(*serverConfig) error

type serverConfig struct {
	configFile string
	sets       []func(*server.Options) // from the options, in order
	log        io.Writer
	verbose    bool
	edits      []func(*server.Options)
	ready      time.Duration
	diskEvents func(DiskEvent)
}

func (c *serverConfig) set(f func(*server.Options)) { c.sets = append(c.sets, f) }

// WithConfigFile starts from a nats-server configuration file: its listen
// address, authorization, accounts, users and their permissions, nkeys, TLS,
// limits and cluster. The other options apply on top of it, wherever they
// are given; the file's other settings stand, and JetStream is always on. A
// file that names no host listens on DefaultListen's loopback host, not on
// every interface as nats-server would; one that names no port, on
// DefaultListen's port. The store directory is WithStoreDir's, else the
// file's, else a temporary one. A file that cannot be read or parsed is
// kv.ErrInvalidConfig. Default: no file.
func WithConfigFile(path string) Option {
	return func(c *serverConfig) error {
		if path == "" {
			return fmt.Errorf("%w: the config file path is empty", kv.ErrInvalidConfig)
		}
		c.configFile = path
		return nil
	}
}

// ReadConfigFile parses a nats-server configuration file as WithConfigFile
// does, with the same defaults, for a caller that wants to look at it
// before starting the server. A file that cannot be read or parsed is
// kv.ErrInvalidConfig.
func ReadConfigFile(path string) (*server.Options, error) {
	host, port, _ := splitHostPort(DefaultListen)
	so := &server.Options{Host: host, Port: port}
	if err := so.ProcessConfigFile(path); err != nil {
		return nil, fmt.Errorf("%w: config file %s: %w", kv.ErrInvalidConfig, path, err)
	}
	if so.Host == "" {
		so.Host = host // a file with "port" but no "host" or "listen"
	}
	return so, nil
}

// WithListen sets the client listen address HOST:PORT; port -1 picks a free
// port. Default: DefaultListen (loopback only).
func WithListen(hostport string) Option {
	return func(c *serverConfig) error {
		host, port, err := splitHostPort(hostport)
		if err != nil {
			return err
		}
		c.set(func(o *server.Options) { o.Host, o.Port = host, port })
		return nil
	}
}

// WithStoreDir sets the JetStream store directory. Default: the config
// file's, else a fresh directory under the system temp dir, suitable for
// tests only.
func WithStoreDir(dir string) Option {
	return func(c *serverConfig) error {
		if dir != "" {
			c.set(func(o *server.Options) { o.StoreDir = dir })
		}
		return nil
	}
}

// WithHTTP enables the monitoring endpoint on HOST:PORT. Default: off.
func WithHTTP(hostport string) Option {
	return func(c *serverConfig) error {
		host, port, err := splitHostPort(hostport)
		if err != nil {
			return err
		}
		c.set(func(o *server.Options) { o.HTTPHost, o.HTTPPort = host, port })
		return nil
	}
}

// WithServerName names the server; names must be unique in a cluster.
// Default: a generated id.
func WithServerName(name string) Option {
	return func(c *serverConfig) error { c.set(func(o *server.Options) { o.ServerName = name }); return nil }
}

// WithCluster joins a JetStream cluster: its name, this server's route
// listen address HOST:PORT (port -1 picks a free port) and the route URLs of
// the other servers (nats://host:port). Default: standalone.
func WithCluster(name, listen string, routes []string) Option {
	return func(c *serverConfig) error {
		if name == "" {
			return fmt.Errorf("%w: a cluster needs a name", kv.ErrInvalidConfig)
		}
		host, port, err := splitHostPort(listen)
		if err != nil {
			return err
		}
		rs := server.RoutesFromStr(strings.Join(routes, ","))
		c.set(func(o *server.Options) {
			o.Cluster.Name, o.Cluster.Host, o.Cluster.Port = name, host, port
			o.Routes = rs
		})
		return nil
	}
}

// WithSyncAlways makes the store fsync every write before acknowledging it.
// Default: false, an fsync every two minutes: a process crash loses nothing,
// an OS crash or power loss can lose the acknowledged writes of that window.
func WithSyncAlways(always bool) Option {
	return func(c *serverConfig) error { c.set(func(o *server.Options) { o.SyncAlways = always }); return nil }
}

// WithLog writes the server's warnings and errors to w, and its notices too
// when verbose. Default: silent.
func WithLog(w io.Writer, verbose bool) Option {
	return func(c *serverConfig) error { c.log, c.verbose = w, verbose; return nil }
}

// WithReadyTimeout bounds how long Start waits for the server to accept
// clients. Default: 10s.
func WithReadyTimeout(d time.Duration) Option {
	return func(c *serverConfig) error { c.ready = d; return nil }
}

// WithServerOptions edits nats-server's options directly (authorization,
// TLS, limits); edits run after the other options. Default: none.
func WithServerOptions(edit func(*server.Options)) Option {
	return func(c *serverConfig) error { c.edits = append(c.edits, edit); return nil }
}

// Start starts an embedded nats-server with JetStream and waits until
// it accepts clients. It listens on loopback unless WithListen or the config
// file says otherwise, and installs no signal handlers: the caller stops it
// with Shutdown.
func Start(opts ...Option) (*Server, error) {
	c := serverConfig{ready: 10 * time.Second}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	so := &server.Options{}
	if c.configFile != "" {
		var err error
		if so, err = ReadConfigFile(c.configFile); err != nil {
			return nil, err
		}
	} else {
		so.Host, so.Port, _ = splitHostPort(DefaultListen)
	}
	so.JetStream = true
	so.NoSigs = true
	so.NoLog = true
	for _, set := range c.sets {
		set(so)
	}
	for _, edit := range c.edits {
		edit(so)
	}
	var tempDir string
	if so.StoreDir == "" {
		dir, err := os.MkdirTemp("", "baton-jetstream-")
		if err != nil {
			return nil, fmt.Errorf("%w: store dir: %w", kv.ErrInvalidConfig, err)
		}
		tempDir, so.StoreDir = dir, dir
	}
	fail := func(err error) (*Server, error) {
		if tempDir != "" {
			os.RemoveAll(tempDir)
		}
		return nil, err
	}
	if so.Cluster.Port != 0 && so.ServerName == "" {
		return fail(fmt.Errorf("%w: a clustered server needs a unique server name", kv.ErrInvalidConfig))
	}
	for _, hp := range []struct {
		host string
		port int
	}{{so.Host, so.Port}, {so.Cluster.Host, so.Cluster.Port}, {so.HTTPHost, so.HTTPPort}} {
		if err := checkFree(hp.host, hp.port); err != nil {
			return fail(err)
		}
	}
	ns, err := server.NewServer(so)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", kv.ErrInvalidConfig, err))
	}
	if c.log != nil {
		ns.SetLoggerV2(&writerLogger{w: c.log, verbose: c.verbose}, false, false, false)
	}
	ns.Start()
	if !ns.ReadyForConnections(c.ready) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return fail(fmt.Errorf("%w: embedded server not ready after %s (is %s:%d in use?)",
			kv.ErrUnavailable, c.ready, so.Host, so.Port))
	}
	if so.JetStream && !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		return fail(fmt.Errorf("%w: JetStream did not start (store %s)", kv.ErrUnavailable, so.StoreDir))
	}
	return &Server{ns: ns, tempDir: tempDir, disk: startDiskGuard(ns, so, c.diskEvents)}, nil
}

// ClientURL is the URL clients on this host connect to: loopback when the
// server listens on every interface.
func (s *Server) ClientURL() string { return dialable(s.ns.ClientURL()) }

// dialable makes a client URL whose host is a wildcard listen address
// (0.0.0.0, ::: the server listens on every interface) name loopback,
// which a client on this host can dial; any other URL is returned as is.
func dialable(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	ip := net.ParseIP(pu.Hostname())
	if ip == nil || !ip.IsUnspecified() {
		return u
	}
	loop := "127.0.0.1"
	if ip.To4() == nil {
		loop = "::1"
	}
	pu.Host = net.JoinHostPort(loop, pu.Port())
	return pu.String()
}

// Name is the server's name, as a cluster and HandOff know it.
func (s *Server) Name() string { return s.ns.Name() }

// Clustered reports whether the server is part of a JetStream cluster.
func (s *Server) Clustered() bool { return s.ns.JetStreamIsClustered() }

// NATS is the underlying nats-server, for what this package does not wrap.
func (s *Server) NATS() *server.Server { return s.ns }

// StoreDir is the JetStream store directory in use.
func (s *Server) StoreDir() string { return s.ns.StoreDir() }

// Shutdown stops the server and waits until it has stopped. It is
// idempotent.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		s.disk.close()
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		if s.tempDir != "" {
			os.RemoveAll(s.tempDir)
		}
	})
}

func splitHostPort(hostport string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, fmt.Errorf("%w: address %q: want HOST:PORT: %w", kv.ErrInvalidConfig, hostport, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("%w: address %q: port must be -1 (any free port) or 0-65535", kv.ErrInvalidConfig, hostport)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// checkFree fails fast when a fixed port is taken: nats-server itself would
// only log it and never become ready.
func checkFree(host string, port int) error {
	if port <= 0 {
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%w: %w", kv.ErrUnavailable, err)
	}
	return l.Close()
}

// writerLogger adapts an io.Writer to nats-server's Logger.
type writerLogger struct {
	mu      sync.Mutex
	w       io.Writer
	verbose bool
}

func (l *writerLogger) logf(level, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s nats-server %s: %s\n", time.Now().UTC().Format(time.RFC3339), level, fmt.Sprintf(format, v...))
}

func (l *writerLogger) Noticef(format string, v ...any) {
	if l.verbose {
		l.logf("notice", format, v...)
	}
}
func (l *writerLogger) Warnf(format string, v ...any)  { l.logf("warning", format, v...) }
func (l *writerLogger) Fatalf(format string, v ...any) { l.logf("fatal", format, v...) }
func (l *writerLogger) Errorf(format string, v ...any) { l.logf("error", format, v...) }
func (l *writerLogger) Debugf(string, ...any)          {}
func (l *writerLogger) Tracef(string, ...any)          {}
