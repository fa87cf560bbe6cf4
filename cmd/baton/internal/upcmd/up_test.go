package upcmd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
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
func start(t *testing.T, o *Options) *kvserver.Server {
	t.Helper()
	file, err := kvserver.ReadConfigFile(o.Config)
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
	s, err := kvserver.Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func loopback(s *kvserver.Server) bool {
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
	listen := kvtest.FreeAddr(t)
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
	file, err := kvserver.ReadConfigFile(conf)
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
		file, err := kvserver.ReadConfigFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := credentialFlags(file); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want it to name %s", conf, got, want)
		}
	}
}

func TestUp_HandoffTimeoutDefaultsToFiveSeconds(t *testing.T) {
	if o := parse(t); o.HandoffTimeout != 5*time.Second {
		t.Errorf("default --handoff-timeout %s, want 5s", o.HandoffTimeout)
	}
	if o := parse(t, "--handoff-timeout", "0"); o.HandoffTimeout != 0 {
		t.Errorf("--handoff-timeout 0 is %s", o.HandoffTimeout)
	}
}

// On stop, a server of a cluster says what it handed off and what it
// could not, one line each.
func TestHandOff_SaysWhatItMovedAndWhatItCouldNot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	cl := kvtest.StartCluster(t, 3)
	c := kvtest.Connect(t, cl.URLs())
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "r3", MarkerTTL: time.Minute, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "r1", MarkerTTL: time.Minute, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	// The server holding r1's only copy, and r3's leadership moved to it.
	i := cl.StreamLeader("KV_r1")
	if cl.StreamLeader("KV_r3") != i {
		prefer := []byte(`{"placement":{"preferred":"` + cl.Servers[i].Name() + `"}}`)
		if _, err := c.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN.KV_r3", prefer, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); cl.StreamLeader("KV_r3") != i; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not take KV_r3's lead", cl.Servers[i].Name())
			}
		}
	}
	var errOut bytes.Buffer
	o := &Options{F: &cmdutil.Factory{IO: &cmdutil.IOStreams{Out: &bytes.Buffer{}, ErrOut: &errOut}}, HandoffTimeout: 10 * time.Second}
	own := kvtest.Connect(t, cl.Servers[i].ClientURL())
	handOff(o, cl.Servers[i], own, []string{"r3", "r1"})
	got := errOut.String()
	if !regexp.MustCompile(`(?m)^baton up: handed KV_r3 \(bucket r3\) to n[123] in \d+ms$`).MatchString(got) ||
		!regexp.MustCompile(`(?m)^baton up: kv: not handed off: hand off bucket r1: no other server holds a copy of KV_r1; stopping anyway$`).MatchString(got) {
		t.Errorf("handoff said:\n%s", got)
	}
}
