package kvserver_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
)

// writeConfig writes a nats-server configuration file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func startServer(t *testing.T, opts ...kvserver.Option) *kvserver.Server {
	t.Helper()
	s, err := kvserver.Start(opts...)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func isLoopback(t *testing.T, s *kvserver.Server) bool {
	t.Helper()
	addr, ok := s.NATS().Addr().(*net.TCPAddr)
	return ok && addr.IP.IsLoopback()
}

func TestStartServer_ListensOnLoopbackByDefault(t *testing.T) {
	// Only the port is changed (4222 may be taken): the host is the default.
	s := startServer(t, kvserver.WithStoreDir(t.TempDir()), kvserver.WithServerOptions(func(o *server.Options) { o.Port = -1 }))
	if !isLoopback(t, s) || !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") {
		t.Errorf("listens on %s (%s), want 127.0.0.1", s.NATS().Addr(), s.ClientURL())
	}
}

func TestStartServer_ConfigFileIsTheBaseTheOptionsApplyOnTop(t *testing.T) {
	ctx := context.Background()
	store := t.TempDir()
	conf := writeConfig(t, `
port: -1
jetstream { store_dir: "`+store+`" }
authorization { users: [ {user: alice, password: alice-pw} ] }
`)
	// No host in the file: loopback, not every interface.
	s := startServer(t, kvserver.WithConfigFile(conf))
	if !isLoopback(t, s) || !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") {
		t.Errorf("listens on %s, want 127.0.0.1", s.NATS().Addr())
	}
	if !strings.HasPrefix(s.StoreDir(), store) {
		t.Errorf("store %s, want the file's %s", s.StoreDir(), store)
	}
	// The file's authorization stands.
	if _, err := kv.Connect(ctx, kv.WithURL(s.ClientURL())); !errors.Is(err, kv.ErrPermission) {
		t.Errorf("connect without credentials: %v, want ErrPermission", err)
	}
	c := kvtest.Connect(t, s.ClientURL(), kv.WithUserPassword("alice", "alice-pw"))
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "b", MarkerTTL: time.Minute}); err != nil {
		t.Errorf("JetStream on: %v", err)
	}
	s.Shutdown()

	// Options given apply on top of the file, in whatever order.
	other := t.TempDir()
	s = startServer(t, kvserver.WithStoreDir(other), kvserver.WithConfigFile(conf), kvserver.WithListen("127.0.0.1:-1"))
	if !strings.HasPrefix(s.StoreDir(), other) {
		t.Errorf("store %s, want the option's %s", s.StoreDir(), other)
	}
	if _, err := kv.Connect(ctx, kv.WithURL(s.ClientURL())); !errors.Is(err, kv.ErrPermission) {
		t.Errorf("the file's authorization is gone: %v", err)
	}
}

func TestStartServer_ConfigFileWithTLSServesATLSURL(t *testing.T) {
	ca := kvtest.NewCA(t)
	cert, key := ca.ServerCert()
	conf := writeConfig(t, `
listen: "127.0.0.1:-1"
tls { cert_file: "`+cert+`", key_file: "`+key+`" }
`)
	s := startServer(t, kvserver.WithConfigFile(conf), kvserver.WithStoreDir(t.TempDir()))
	if !strings.HasPrefix(s.ClientURL(), "tls://127.0.0.1:") {
		t.Fatalf("client URL %s, want tls://127.0.0.1:…", s.ClientURL())
	}
	c := kvtest.Connect(t, s.ClientURL(), kv.WithTLS(ca.File, "", ""))
	if _, err := c.Ensure(context.Background(), kv.BucketConfig{Name: "b", MarkerTTL: time.Minute}); err != nil {
		t.Errorf("use over TLS: %v", err)
	}
}

func TestStartServer_BadConfigFileIsInvalidConfig(t *testing.T) {
	for name, path := range map[string]string{
		"missing":  filepath.Join(t.TempDir(), "nope.conf"),
		"garbled":  writeConfig(t, "authorization { users: [ {user: "),
		"bad port": writeConfig(t, "port: \"many\""),
	} {
		if _, err := kvserver.Start(kvserver.WithConfigFile(path)); !errors.Is(err, kv.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := kvserver.Start(kvserver.WithConfigFile("")); !errors.Is(err, kv.ErrInvalidConfig) {
		t.Errorf("empty path: %v, want ErrInvalidConfig", err)
	}
}

// A server listening on every interface is named by a loopback URL (what
// `baton up` writes into server.json for the host's other commands), never
// by the wildcard address.
func TestClientURL_AWildcardListenIsNamedByLoopback(t *testing.T) {
	for in, want := range map[string]string{
		"nats://0.0.0.0:4222":      "nats://127.0.0.1:4222",
		"tls://0.0.0.0:4333":       "tls://127.0.0.1:4333",
		"nats://[::]:4222":         "nats://[::1]:4222",
		"nats://127.0.0.1:4222":    "nats://127.0.0.1:4222",
		"nats://10.1.2.3:4222":     "nats://10.1.2.3:4222",
		"nats://nats.example:4222": "nats://nats.example:4222",
	} {
		if got := kvserver.Dialable(in); got != want {
			t.Errorf("dialable(%q) = %q, want %q", in, got, want)
		}
	}
}
