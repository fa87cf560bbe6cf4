package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

var batonStreams = []string{"KV_baton-sessions", "KV_baton-leases", "KV_baton-queues"}

// streamLeaders names the server leading each of baton's streams, as the
// streams answer through c.
func streamLeaders(t *testing.T, c *kv.Client) map[string]string {
	t.Helper()
	leaders := map[string]string{}
	for _, st := range batonStreams {
		deadline := time.Now().Add(10 * time.Second)
		for leaders[st] == "" && time.Now().Before(deadline) {
			m, err := c.Conn().Request("$JS.API.STREAM.INFO."+st, nil, time.Second)
			if err != nil {
				continue // no leader yet: nobody answers
			}
			var info jetstream.StreamInfo
			if err := json.Unmarshal(m.Data, &info); err == nil && info.Cluster != nil {
				leaders[st] = info.Cluster.Leader
			}
		}
		if leaders[st] == "" {
			t.Fatalf("%s has no leader", st)
		}
	}
	return leaders
}

// TestUp_SIGTERMHandsTheBucketsToAnotherServerFirst stops the `baton up`
// that leads baton's streams: it names each handoff, exits 0, and the
// other servers lead every stream afterwards.
func TestUp_SIGTERMHandsTheBucketsToAnotherServerFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	servers := startUpCluster(t)
	c := kvtest.Connect(t, servers[0].url+","+servers[1].url+","+servers[2].url)
	before := streamLeaders(t, c)
	// The server that leads the most streams.
	var stopped *upServer
	led := 0
	for _, s := range servers {
		n := 0
		for _, l := range before {
			if l == s.name {
				n++
			}
		}
		if n > led {
			stopped, led = s, n
		}
	}
	if err := stopped.stop(syscall.SIGTERM); exitCode(err) != 0 {
		t.Errorf("%s exited %v on SIGTERM; stderr:\n%s", stopped.name, err, stopped.stderr)
	}
	stderr := stopped.stderr.String()
	t.Logf("%s (led %d of %d streams) said:\n%s", stopped.name, led, len(before), stderr)
	for st, l := range before {
		if l != stopped.name {
			continue
		}
		re := regexp.MustCompile(`baton up: handed ` + st + ` \(bucket [a-z-]+\) to (n[123]) in [0-9.]+[mµ]?s\n`)
		if m := re.FindStringSubmatch(stderr); m == nil || m[1] == stopped.name {
			t.Errorf("stderr does not name the handoff of %s to another server", st)
		}
	}
	if strings.Contains(stderr, "stopping anyway") {
		t.Errorf("a handoff failed in a healthy cluster")
	}
	var rest []string
	for _, s := range servers {
		if s != stopped {
			rest = append(rest, s.url)
		}
	}
	after := streamLeaders(t, kvtest.Connect(t, strings.Join(rest, ",")))
	for st, l := range after {
		if l == stopped.name {
			t.Errorf("%s is led by %s, which stopped", st, l)
		}
	}
}

// TestUp_ASingleServerStopsWithoutAHandoff: a server outside a cluster
// has no one to hand off to and stops as before.
func TestUp_ASingleServerStopsWithoutAHandoff(t *testing.T) {
	state := t.TempDir()
	up := exec.Command(batonBin, "up", "--listen", "127.0.0.1:-1")
	up.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + state, "BATON_STATE_DIR=" + state, "BATON_HOST_ID=host-a", "GORACE=atexit_sleep_ms=0"}
	out, _ := up.StdoutPipe()
	stderr := &syncBuffer{}
	up.Stderr = stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Process.Kill(); up.Wait() })
	r := bufio.NewReader(out)
	if line, err := r.ReadString('\n'); err != nil || !strings.Contains(line, "serving") {
		t.Fatalf("baton up said %q, %v", line, err)
	}
	_ = up.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { _, _ = io.Copy(io.Discard, r); done <- up.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if exitCode(err) != 0 {
			t.Errorf("baton up exited %v on SIGTERM", err)
		}
	case <-ctx.Done():
		t.Fatal("baton up did not stop on SIGTERM")
	}
	if got := stderr.String(); got != "baton up: stopping\n" {
		t.Errorf("a single server said on stop %q, want only that it stops", got)
	}
}
