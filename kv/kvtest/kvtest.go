// Package kvtest starts real nats-servers for tests: one in process, or a
// JetStream cluster on loopback. Nothing here mocks NATS.
package kvtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
)

// StartServer starts a JetStream server on a free loopback port with its
// store in a temporary directory, and shuts it down when the test ends.
func StartServer(tb testing.TB, opts ...kvserver.Option) *kvserver.Server {
	tb.Helper()
	all := append([]kvserver.Option{kvserver.WithListen("127.0.0.1:-1"), kvserver.WithStoreDir(tb.TempDir())}, opts...)
	s, err := kvserver.Start(all...)
	if err != nil {
		tb.Fatalf("start nats-server: %v", err)
	}
	tb.Cleanup(s.Shutdown)
	return s
}

// Connect returns a client of url, closed when the test ends.
func Connect(tb testing.TB, url string, opts ...kv.Option) *kv.Client {
	tb.Helper()
	c, err := kv.Connect(context.Background(), append([]kv.Option{kv.WithURL(url)}, opts...)...)
	if err != nil {
		tb.Fatalf("connect %s: %v", url, err)
	}
	tb.Cleanup(c.Close)
	return c
}

// Cluster is a JetStream cluster of servers on loopback.
type Cluster struct {
	Servers []*kvserver.Server
	tb      testing.TB
	opts    [][]kvserver.Option
}

// StartCluster starts n servers that route to each other and waits until
// JetStream has a meta leader.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return StartClusterWith(tb, n, nil)
}

// StartClusterWith is StartCluster with extra options for server i (0 to
// n-1), applied after its own (nil: none).
func StartClusterWith(tb testing.TB, n int, extra func(i int) []kvserver.Option) *Cluster {
	tb.Helper()
	ports := freePorts(tb, n)
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(p)
	}
	c := &Cluster{tb: tb}
	for i := range n {
		opts := []kvserver.Option{
			kvserver.WithListen("127.0.0.1:-1"),
			kvserver.WithStoreDir(tb.TempDir()),
			kvserver.WithServerName(fmt.Sprintf("n%d", i+1)),
			kvserver.WithCluster("baton-test", "127.0.0.1:"+strconv.Itoa(ports[i]), routes),
		}
		if extra != nil {
			opts = append(opts, extra(i)...)
		}
		c.opts = append(c.opts, opts)
		s, err := kvserver.Start(opts...)
		if err != nil {
			tb.Fatalf("start cluster node %d: %v", i+1, err)
		}
		tb.Cleanup(s.Shutdown)
		c.Servers = append(c.Servers, s)
		// Restart listens where the server did: clients know the URL.
		c.opts[i] = append(c.opts[i], kvserver.WithListen(strings.TrimPrefix(s.ClientURL(), "nats://")))
	}
	c.WaitForMetaLeader(30 * time.Second)
	return c
}

// URLs is a comma-separated list of every server's client URL.
func (c *Cluster) URLs() string {
	var s string
	for i, srv := range c.Servers {
		if i > 0 {
			s += ","
		}
		s += srv.ClientURL()
	}
	return s
}

// WaitForMetaLeader waits until the cluster has elected a JetStream meta
// leader that every server knows.
func (c *Cluster) WaitForMetaLeader(timeout time.Duration) {
	c.tb.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		leaders, current := 0, 0
		for _, s := range c.Servers {
			if s.NATS().JetStreamIsLeader() {
				leaders++
			}
			if s.NATS().JetStreamIsCurrent() {
				current++
			}
		}
		if leaders == 1 && current == len(c.Servers) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.tb.Fatalf("no JetStream meta leader after %s", timeout)
}

// Stop shuts server i down as a crash or a plain stop would: no handoff.
func (c *Cluster) Stop(i int) { c.Servers[i].Shutdown() }

// Restart starts server i again after Stop, with its name, store, route
// and client address, and returns it; it is shut down when the test ends.
func (c *Cluster) Restart(i int) *kvserver.Server {
	c.tb.Helper()
	s, err := kvserver.Start(c.opts[i]...)
	if err != nil {
		c.tb.Fatalf("restart cluster node %d: %v", i+1, err)
	}
	c.tb.Cleanup(s.Shutdown)
	c.Servers[i] = s
	return s
}

// WaitCurrent waits until server i knows the meta leader and its copy of
// each stream (in the global account) has caught up.
func (c *Cluster) WaitCurrent(i int, timeout time.Duration, streams ...string) {
	c.tb.Helper()
	ns := c.Servers[i].NATS()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		current := ns.JetStreamIsCurrent()
		for _, st := range streams {
			current = current && ns.JetStreamIsStreamCurrent("$G", st)
		}
		if current {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.tb.Fatalf("cluster node %d not current after %s", i+1, timeout)
}

// StreamLeader returns the index of the server leading the stream.
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.Servers {
		if s.NATS().JetStreamIsStreamLeader("$G", stream) {
			return i
		}
	}
	return -1
}

// freePorts returns n loopback ports that were free a moment ago (see
// FreeAddr).
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, 0, n)
	for range n {
		_, p, err := net.SplitHostPort(FreeAddr(tb))
		if err != nil {
			tb.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		ports = append(ports, port)
	}
	return ports
}

// FreeAddr returns a loopback address (host:port) that was free a moment
// ago, for a server a test starts next. The port is taken below the
// kernel's range of ephemeral ports, so that no outgoing connection of a
// busy machine (another test's client) is given it in between, as happens
// to a port the kernel picked; a port another test picked the same way is
// a 1 in thousands chance.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	lo := ephemeralLow()
	for range 100 {
		port := 10000 + rand.IntN(lo-10000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	tb.Fatalf("no free loopback port between 10000 and %d", lo)
	return ""
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 11000 {
		return 32768
	}
	return lo
}
