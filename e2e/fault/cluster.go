package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// node is one `baton up` of the cluster.
type node struct {
	name        string
	host        string // the address it listens on
	port, cport int
	state       string
	disk        *smallDisk // the tmpfs state is on (nil: none)
	cmd         *exec.Cmd
	exited      chan struct{}
}

// cluster is three `baton up` processes on loopback forming one JetStream
// cluster; the buckets are kept on all three.
type cluster struct {
	bin    string
	dir    string
	net    *network
	nodes  []*node
	routes string
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// newCluster lays out three servers: each in its namespace of nw on the
// standard ports, or on loopback on free ports when nw is off.
func newCluster(bin, dir string, nw *network) (*cluster, error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	c := &cluster{bin: bin, dir: dir, net: nw}
	var routes []string
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		n := &node{name: name, host: nw.addr(name), port: ports[2*i], cport: ports[2*i+1], state: filepath.Join(dir, name)}
		if nw.on {
			n.port, n.cport = 4222, 6222
		}
		if err := os.MkdirAll(n.state, 0o700); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
		routes = append(routes, fmt.Sprintf("nats://%s:%d", n.host, n.cport))
	}
	c.routes = strings.Join(routes, ",")
	// The servers do not tell clients of one another: a client of the slow
	// host knows the servers only through its proxies, and must not find a
	// way round them when its links are stalled (it did: a stalled `run`
	// reconnected to a server's own address).
	if err := os.WriteFile(filepath.Join(dir, "server.conf"), []byte("cluster { no_advertise: true }\n"), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

// urls is the client URL list for every server of the cluster.
func (c *cluster) urls() string {
	var us []string
	for _, n := range c.nodes {
		us = append(us, fmt.Sprintf("nats://%s:%d", n.host, n.port))
	}
	return strings.Join(us, ",")
}

// hostPorts are the servers' client addresses, for the proxies.
func (c *cluster) hostPorts() []string {
	var hp []string
	for _, n := range c.nodes {
		hp = append(hp, net.JoinHostPort(n.host, strconv.Itoa(n.port)))
	}
	return hp
}

// start starts node i and waits until it accepts clients.
func (c *cluster) start(ctx context.Context, i int) error {
	n := c.nodes[i]
	logf, err := os.OpenFile(filepath.Join(c.dir, n.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := c.net.command(n.name, c.bin, "up", "--config", filepath.Join(c.dir, "server.conf"), "--listen", net.JoinHostPort(n.host, strconv.Itoa(n.port)), "--server-name", n.name,
		"--cluster-name", "baton-fault", "--cluster-listen", net.JoinHostPort(n.host, strconv.Itoa(n.cport)), "--routes", c.routes)
	cmd.Env = append(os.Environ(), "BATON_STATE_DIR="+n.state)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(n.exited)
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(n.host, strconv.Itoa(n.port)), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-n.exited:
			return fmt.Errorf("%s exited while starting; see %s", n.name, filepath.Join(c.dir, n.name+".log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not accept clients after 60s", n.name)
		}
	}
}

// kill SIGKILLs node i and waits for it to be gone.
func (c *cluster) kill(i int) {
	n := c.nodes[i]
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.exited
	n.cmd = nil
}

// terminate stops node i as an operator would for an upgrade (SIGTERM) and
// waits for it to be gone, SIGKILLing it after 30 s; it reports how long it
// took to exit and whether it exited on its own.
func (c *cluster) terminate(i int) (time.Duration, bool) {
	n := c.nodes[i]
	if n.cmd == nil {
		return 0, true
	}
	start := time.Now()
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	clean := true
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		clean = false
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
	n.cmd = nil
	return time.Since(start), clean
}

// stop ends every node with SIGTERM, then SIGKILL after 10 s.
func (c *cluster) stop() {
	for _, n := range c.nodes {
		if n.cmd != nil {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
		n.cmd = nil
	}
}

// leaderOf names the server leading stream, through any live server.
func (c *cluster) leaderOf(ctx context.Context, stream string) (string, error) {
	nc, err := nats.Connect(c.urls(), nats.Timeout(2*time.Second))
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	info := s.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", fmt.Errorf("stream %s has no leader now", stream)
	}
	return info.Cluster.Leader, nil
}

func (c *cluster) index(name string) int {
	for i, n := range c.nodes {
		if n.name == name {
			return i
		}
	}
	return -1
}
