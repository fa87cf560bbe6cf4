package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/kv/kvtest"
)

// TestUp_ThreeServersFormAClusterWithReplicatedBuckets runs three `baton up`
// as one JetStream cluster and uses it through different servers.
func TestUp_ThreeServersFormAClusterWithReplicatedBuckets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	servers := startUpCluster(t)
	urls := []string{servers[0].url, servers[1].url, servers[2].url}
	a := &host{w: &world{t: t, url: urls[0]}, id: "host-a", state: t.TempDir()}
	b := &host{w: &world{t: t, url: urls[2]}, id: "host-b", state: t.TempDir()}
	a.must("join", "s", "--task", "T-1")
	b.expect(4, []string{"join", "s", "--task", "T-2"}, "belongs to host host-a")
	if row := b.sessions()["s"]; row == nil || row["host"] != "host-a" {
		t.Errorf("status through another server: %v", row)
	}
	if r := b.must("doctor", "--replicas", "3"); !strings.Contains(r.stdout, "no problems") {
		t.Errorf("doctor --replicas 3: %s", r)
	}
	// A cluster baton did not set up (here: another prefix): doctor reports
	// the missing buckets and --fix creates them on three servers.
	if r := b.expect(7, []string{"doctor", "--prefix", "other", "--replicas", "3"}); !strings.Contains(r.stdout+r.stderr, "other-sessions does not exist") {
		t.Errorf("doctor on a cluster without the buckets: %s", r)
	}
	b.must("doctor", "--prefix", "other", "--replicas", "3", "--fix")
	a.must("--prefix", "other", "join", "s", "--task", "T-3")
	if r := b.must("doctor", "--prefix", "other", "--replicas", "3"); !strings.Contains(r.stdout, "no problems") {
		t.Errorf("doctor --replicas 3 after --fix: %s", r)
	}
}

// upServer is one `baton up` of a cluster.
type upServer struct {
	name   string
	url    string
	cmd    *exec.Cmd
	stderr *syncBuffer

	once sync.Once
	err  error // how it exited
}

// stop signals the server and waits until it has exited; it returns how.
// Later calls return the same.
func (s *upServer) stop(sig os.Signal) error {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(sig)
		s.err = s.cmd.Wait()
	})
	return s.err
}

// startUpCluster runs three `baton up` as one JetStream cluster on loopback
// and waits until each serves with its buckets on three replicas. The
// cluster ports are picked free and then handed to the servers, so another
// process may take one in between: a start that fails so is tried again,
// up to three times.
func startUpCluster(t *testing.T) []*upServer {
	t.Helper()
	for attempt := 1; ; attempt++ {
		servers, err := tryUpCluster(t)
		if err == nil {
			return servers
		}
		for _, s := range servers {
			_ = s.stop(os.Kill)
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("starting the cluster again: %v", err)
	}
}

func tryUpCluster(t *testing.T) ([]*upServer, error) {
	var addrs, routes []string
	for range 3 {
		a := kvtest.FreeAddr(t)
		addrs = append(addrs, a)
		routes = append(routes, "nats://"+a)
	}
	servers := make([]*upServer, 0, 3)
	ready := make(chan int, 3)
	for i := range 3 {
		state := t.TempDir()
		name := fmt.Sprintf("n%d", i+1)
		cmd := exec.Command(batonBin, "up", "--listen", "127.0.0.1:-1", "--server-name", name,
			"--cluster-name", "baton-e2e", "--cluster-listen", addrs[i],
			"--routes", strings.Join(routes, ","), "--json")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + state, "BATON_STATE_DIR=" + state, "GORACE=atexit_sleep_ms=0"}
		out, _ := cmd.StdoutPipe()
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			return servers, err
		}
		s := &upServer{name: name, cmd: cmd, stderr: stderr}
		servers = append(servers, s)
		t.Cleanup(func() { s.stop(interrupt) })
		go func() {
			// --json prints one indented document once the server serves.
			doc, _ := readJSONDoc(bufio.NewReader(out))
			if u, ok := doc["url"].(string); ok && doc["replicas"] == float64(3) {
				s.url = u
			}
			ready <- i
		}()
	}
	for range 3 {
		select {
		case <-ready:
		case <-time.After(60 * time.Second):
			var logs strings.Builder
			for _, s := range servers {
				fmt.Fprintf(&logs, "%s's stderr:\n%s\n", s.name, s.stderr)
			}
			return servers, fmt.Errorf("the cluster did not come up within 60s\n%s", &logs)
		}
	}
	for i, s := range servers {
		if s.url == "" {
			return servers, fmt.Errorf("server %d did not report its URL with 3 replicas; its stderr:\n%s", i+1, s.stderr)
		}
	}
	return servers, nil
}
