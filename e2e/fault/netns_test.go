package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inNamespace runs fn on a thread moved into the namespace ns; sockets fn
// makes stay in it.
func inNamespace(t *testing.T, ns string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Errorf("open namespace %s: %v", ns, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			t.Errorf("setns %s: %v", ns, err)
			return
		}
		fn()
	}()
	<-done
}

// TestNetwork_CutsHealsAndFlapsLinks checks the fault harness's network: a
// member reaches another over the bridge, a cut stalls a live connection
// and refuses a new one, a heal restores both, and a link taken down stalls
// it too.
func TestNetwork_CutsHealsAndFlapsLinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	nw := newNetwork(context.Background(), []string{"a", "b"})
	if !nw.on {
		t.Skipf("no network namespaces here: %s", nw.why)
	}
	t.Cleanup(nw.teardown)

	var l net.Listener
	inNamespace(t, nw.byName["b"].ns, func() {
		var err error
		if l, err = net.Listen("tcp", nw.addr("b")+":7000"); err != nil {
			t.Errorf("listen in b: %v", err)
		}
	})
	if l == nil {
		t.FailNow()
	}
	defer l.Close()
	go func() { // echo every line
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()

	var conn net.Conn
	dial := func() (net.Conn, error) {
		var c net.Conn
		var err error
		inNamespace(t, nw.byName["a"].ns, func() { c, err = net.DialTimeout("tcp", nw.addr("b")+":7000", time.Second) })
		return c, err
	}
	echo := func(c net.Conn) error {
		if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
			return err
		}
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		buf := make([]byte, 1)
		if _, err := c.Read(buf); err != nil {
			return err
		}
		if buf[0] != 'x' {
			return fmt.Errorf("echo %q", buf)
		}
		return nil
	}
	var err error
	if conn, err = dial(); err != nil {
		t.Fatalf("a cannot reach b before any cut: %v", err)
	}
	defer conn.Close()
	if err := echo(conn); err != nil {
		t.Fatalf("echo before any cut: %v", err)
	}

	// The harness's namespace reaches every member, always.
	if c, err := net.DialTimeout("tcp", nw.addr("b")+":7000", time.Second); err != nil {
		t.Fatalf("the harness cannot reach b: %v", err)
	} else {
		c.Close()
	}

	if err := nw.cut([]string{"a"}, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	if err := echo(conn); err == nil {
		t.Error("a live connection still carries data across a cut")
	}
	if c, err := dial(); err == nil {
		c.Close()
		t.Error("a new connection crosses a cut")
	}
	if c, err := net.DialTimeout("tcp", nw.addr("b")+":7000", time.Second); err != nil {
		t.Errorf("a cut between a and b cut the harness off from b: %v", err)
	} else {
		c.Close()
	}
	// Cuts nest: healing one of two leaves the pair cut.
	if err := nw.cut([]string{"b"}, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if err := nw.heal([]string{"a"}, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	if c, err := dial(); err == nil {
		c.Close()
		t.Error("a new connection crosses a pair still cut once")
	}
	if err := nw.heal([]string{"b"}, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	c2, err := dial()
	if err != nil {
		t.Fatalf("a cannot reach b after the heal: %v", err)
	}
	defer c2.Close()
	if err := echo(c2); err != nil {
		t.Fatalf("echo after the heal: %v", err)
	}

	if err := nw.setLink("a", false); err != nil {
		t.Fatal(err)
	}
	if err := echo(c2); err == nil {
		t.Error("a connection carries data while a's link is down")
	}
	if err := nw.setLink("a", true); err != nil {
		t.Fatal(err)
	}
	// The bridge may take a moment to forward on a port that came up.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c3, err := dial()
		if err == nil {
			c3.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a cannot reach b 10 s after its link came up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
