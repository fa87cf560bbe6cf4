package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// network puts each server and each client host in a network namespace of
// its own, joined by veth pairs to a bridge in the harness's namespace, so
// that links can break, split and flap for real (see adr/0019). It needs
// root and iproute2; without them the run stays on loopback and network
// (*network).on is false.
//
// A cut between two members is a pair of blackhole routes, one in each
// member's namespace: packets on a live TCP connection are dropped without
// an answer (the connection stalls and times out, as over a broken link),
// and a new connection is refused at once by the sender's kernel. The kernel
// here has no netfilter or tc classifiers, so routes are what there is. A
// flap takes the member's veth down and up. The harness's own namespace (the
// checker that plays the protected resource, the library clients, the
// toxiproxy listeners) reaches every member and is never cut.
type network struct {
	on     bool
	why    string // why it is off
	prefix string // bf<pid>: every namespace and link of the run starts with it
	bridge string
	gw     string // the bridge's address: the harness's side
	mu     sync.Mutex
	byName map[string]*member
	cuts   map[[2]string]int // pair (sorted) -> how many faults cut it now
}

// member is one namespace: a server or a client host.
type member struct {
	name string // n1, h1, ...
	ns   string
	ip   string
	veth string // the end in the harness's namespace
}

// newNetwork creates the bridge and a namespace per name, or returns a
// network that is off (with why) when this process cannot.
func newNetwork(ctx context.Context, names []string) *network {
	n := &network{prefix: fmt.Sprintf("bf%d", os.Getpid()), byName: map[string]*member{}, cuts: map[[2]string]int{}}
	if os.Geteuid() != 0 {
		n.why = "not root"
		return n
	}
	if _, err := exec.LookPath("ip"); err != nil {
		n.why = "no ip command (apt-get install iproute2)"
		return n
	}
	cleanStale()
	base := freeSubnet(ctx, os.Getpid())
	if base == "" {
		n.why = "no free 10.x.y.0/24 subnet (each candidate is routed already)"
		return n
	}
	n.bridge, n.gw = n.prefix+"br", base+"1"
	steps := [][]string{
		{"link", "add", n.bridge, "type", "bridge"},
		{"addr", "add", n.gw + "/24", "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	}
	for i, name := range names {
		m := &member{name: name, ns: n.prefix + "-" + name, ip: base + strconv.Itoa(11+i), veth: fmt.Sprintf("%sv%d", n.prefix, i)}
		n.byName[name] = m
		steps = append(steps,
			[]string{"netns", "add", m.ns},
			[]string{"link", "add", m.veth, "type", "veth", "peer", "name", "eth0", "netns", m.ns},
			[]string{"link", "set", m.veth, "master", n.bridge, "up"},
			[]string{"-n", m.ns, "addr", "add", m.ip + "/24", "dev", "eth0"},
			[]string{"-n", m.ns, "link", "set", "eth0", "up"},
			[]string{"-n", m.ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			n.teardown()
			n.why = err.Error()
			return n
		}
	}
	n.on = true
	return n
}

// freeSubnet picks a 10.x.y.0/24 that no route of this host covers other
// than the default one (a VPN's, a cloud network's, a container bridge's),
// trying a few derived from pid; it returns "10.x.y." or "".
func freeSubnet(ctx context.Context, pid int) string {
	for i := range 16 {
		base := fmt.Sprintf("10.%d.%d.", 100+(pid+i*7)%100, (pid/100+i*13)%256)
		out, err := exec.CommandContext(ctx, "ip", "-4", "-o", "route", "show", "match", base+"0/24").Output()
		if err != nil {
			continue
		}
		taken := false
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] != "default" {
				taken = true
			}
		}
		if !taken {
			return base
		}
	}
	return ""
}

// ip runs one iproute2 command.
func ip(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

var staleRE = regexp.MustCompile(`^bf(\d+)(-|br$)`)

// cleanStale removes namespaces and bridges left by a run that died without
// cleaning up (its process is gone).
func cleanStale() {
	out, _ := exec.Command("ip", "-o", "netns", "list").Output()
	links, _ := exec.Command("ip", "-o", "link", "show", "type", "bridge").Output()
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	for _, line := range strings.Split(string(links), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			names = append(names, strings.TrimSuffix(strings.Split(f[1], "@")[0], ":"))
		}
	}
	for _, name := range names {
		m := staleRE.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		if _, err := os.Stat("/proc/" + m[1]); err == nil {
			continue // its run is alive
		}
		if strings.HasSuffix(name, "br") {
			_ = ip(context.Background(), "link", "del", name)
		} else {
			_ = ip(context.Background(), "netns", "del", name)
		}
	}
}

// teardown removes every namespace and the bridge (a namespace's removal
// removes its veth pair).
func (n *network) teardown() {
	for _, m := range n.byName {
		_ = ip(context.Background(), "netns", "del", m.ns)
	}
	if n.bridge != "" {
		_ = ip(context.Background(), "link", "del", n.bridge)
	}
	n.on = false
}

// addr is the address a member listens on: its namespace's, or loopback
// when the network is off.
func (n *network) addr(name string) string {
	if !n.on {
		return "127.0.0.1"
	}
	return n.byName[name].ip
}

// harnessAddr is where members reach the harness (checker, proxies).
func (n *network) harnessAddr() string {
	if !n.on {
		return "127.0.0.1"
	}
	return n.gw
}

// command makes a command that runs in member's namespace (as is when the
// network is off or member has none).
func (n *network) command(name, bin string, args ...string) *exec.Cmd {
	m := n.byName[name]
	if !n.on || m == nil {
		return exec.Command(bin, args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", m.ns, bin}, args...)...)
}

func pairOf(a, b string) [2]string {
	p := []string{a, b}
	slices.Sort(p)
	return [2]string{p[0], p[1]}
}

// cut breaks the link between every member of as and every member of bs,
// both ways. Cuts nest: a pair is healed when every cut of it is.
// On an error no pair is left cut by this call.
func (n *network) cut(as, bs []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var done [][2]string
	undo := func() {
		for _, p := range done {
			if n.cuts[p]--; n.cuts[p] == 0 {
				delete(n.cuts, p)
				_ = n.routes("del", p[0], p[1])
			}
		}
	}
	for _, a := range as {
		for _, b := range bs {
			p := pairOf(a, b)
			if n.cuts[p] == 0 {
				if err := n.routes("add", p[0], p[1]); err != nil {
					_ = n.routes("del", p[0], p[1]) // the half that may be in place
					undo()
					return err
				}
			}
			n.cuts[p]++
			done = append(done, p)
		}
	}
	return nil
}

// heal undoes a cut.
func (n *network) heal(as, bs []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var first error
	for _, a := range as {
		for _, b := range bs {
			p := pairOf(a, b)
			if n.cuts[p]--; n.cuts[p] > 0 {
				continue
			}
			delete(n.cuts, p)
			if err := n.routes("del", a, b); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

func (n *network) routes(verb, a, b string) error {
	ma, mb := n.byName[a], n.byName[b]
	if err := ip(context.Background(), "-n", ma.ns, "route", verb, "blackhole", mb.ip+"/32"); err != nil {
		return err
	}
	return ip(context.Background(), "-n", mb.ns, "route", verb, "blackhole", ma.ip+"/32")
}

// setLink takes member's link to the bridge down or up.
func (n *network) setLink(name string, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return ip(context.Background(), "link", "set", n.byName[name].veth, state)
}
