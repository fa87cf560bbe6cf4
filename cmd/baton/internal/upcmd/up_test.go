package upcmd

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/kv"
)

func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, Getenv: func(string) string { return "" }}
	var got *Options
	cmd := NewCmdUp(f, func(o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("up %q: %v", args, err)
	}
	return got
}

// start starts the server o's flags describe, as up does.
func start(t *testing.T, o *Options) *kv.Server {
	t.Helper()
	file, err := kv.ReadConfigFile(o.Config)
	if o.Config == "" {
		file, err = nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	opts, _, err := o.serverOptions(t.TempDir(), "host", file)
	if err != nil {
		t.Fatal(err)
	}
	s, err := kv.StartServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func loopback(s *kv.Server) bool {
	addr, ok := s.NATS().Addr().(*net.TCPAddr)
	return ok && addr.IP.IsLoopback()
}

func TestUp_ListensOnLoopbackByDefault(t *testing.T) {
	o := parse(t)
	if o.Listen != "127.0.0.1:4222" || o.ListenSet {
		t.Errorf("default --listen %q (set %v), want 127.0.0.1:4222", o.Listen, o.ListenSet)
	}
	// A config file that names no host keeps the server on loopback.
	conf := filepath.Join(t.TempDir(), "auth.conf")
	if err := os.WriteFile(conf, []byte("port: -1\nauthorization { token: t0ken }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, parse(t, "--config", conf))
	if !loopback(s) {
		t.Errorf("with --config: listens on %s, want loopback", s.NATS().Addr())
	}
	// --listen given wins over the file's port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	o = parse(t, "--config", conf, "--listen", listen)
	if !o.ListenSet {
		t.Fatal("--listen given is not seen as given")
	}
	if s := start(t, o); s.ClientURL() != "nats://"+listen {
		t.Errorf("--listen over the file: %s, want nats://%s", s.ClientURL(), listen)
	}
}

func TestUp_ClusterFromTheConfigFileMeansThreeReplicas(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "cluster.conf")
	if err := os.WriteFile(conf, []byte("cluster { name: c, listen: \"127.0.0.1:6299\" }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := kv.ReadConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	_, replicas, err := parse(t, "--config", conf).serverOptions(t.TempDir(), "h", file)
	if err != nil || replicas != 3 {
		t.Errorf("replicas %d, %v; want 3 in the file's cluster", replicas, err)
	}
	if _, _, err := parse(t, "--config", conf, "--cluster-listen", "127.0.0.1:6300").serverOptions(t.TempDir(), "h", file); !errors.Is(err, cmdutil.ErrUsage) {
		t.Errorf("--cluster-listen without --cluster-name: %v, want a usage error", err)
	}
}

func TestCredentialFlags_NameWhatTheFileAccepts(t *testing.T) {
	for conf, want := range map[string]string{
		"authorization { token: t }":                                                                    "--token",
		"authorization { users: [ {user: a, password: b} ] }":                                           "--user and --password",
		"authorization { users: [ {nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4} ] }": "--nkey",
	} {
		path := filepath.Join(t.TempDir(), "c.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		file, err := kv.ReadConfigFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := credentialFlags(file); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want it to name %s", conf, got, want)
		}
	}
}
