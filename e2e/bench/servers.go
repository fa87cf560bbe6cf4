package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a server or helper the benchmark started; it dies with the
// benchmark (parent-death signal) if the benchmark is killed.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// startLogged starts cmd with its output in a new file at logPath.
func startLogged(name string, cmd *exec.Cmd, logPath string) (*proc, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	return startProc(name, cmd, lf)
}

// startProc starts cmd; its output not sent elsewhere goes to lf, which
// the proc closes when it is stopped.
func startProc(name string, cmd *exec.Cmd, lf *os.File) (*proc, error) {
	if cmd.Stderr == nil {
		cmd.Stderr = lf
	}
	if cmd.Stdout == nil {
		cmd.Stdout = lf
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: lf}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop asks the process to end (SIGTERM) and kills it after 10 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.log.Close()
}

// kill ends the process with SIGKILL and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
	p.log.Close()
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// rss is the resident set size of pid in bytes, from /proc.
func rss(pid int) (int64, error) { return procStatusBytes(pid, "VmRSS") }

// peakRSS is a running process's peak resident memory (VmHWM), in bytes.
func peakRSS(pid int) (int64, error) { return procStatusBytes(pid, "VmHWM") }

// procStatusBytes is the field of /proc/PID/status given in kB, in bytes.
func procStatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

var servingURL = regexp.MustCompile(`nats://[0-9.]+:[0-9]+`)

// natsServer is a `baton up` on a free loopback port.
type natsServer struct {
	*proc
	url  string
	sync string // "" (the default interval) or "always"
}

func startBatonUp(ctx context.Context, baton, dir, sync string) (*natsServer, error) {
	state := filepath.Join(dir, "state")
	args := []string{"up", "--listen", "127.0.0.1:-1", "--store", filepath.Join(dir, "jetstream")}
	if sync != "" {
		args = append(args, "--sync", sync)
	}
	cmd := exec.CommandContext(ctx, baton, args...)
	cmd.Env = append(os.Environ(), "BATON_STATE_DIR="+state, "BATON_HOST_ID=bench-server")
	logPath := filepath.Join(dir, "up.log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	// Its output goes to the log, and the URL it serves on to found.
	cmd.Stdout = &urlSpotter{w: lf, found: found}
	cmd.Stderr = lf
	p, err := startProc("baton up", cmd, lf)
	if err != nil {
		return nil, err
	}
	select {
	case u := <-found:
		return &natsServer{proc: p, url: u, sync: sync}, nil
	case <-p.done:
		return nil, fmt.Errorf("baton up exited at start; see %s", logPath)
	case <-time.After(30 * time.Second):
		p.kill()
		return nil, fmt.Errorf("baton up did not say where it serves within 30s; see %s", logPath)
	}
}

// urlSpotter passes output on to w and sends the first nats:// URL in it.
type urlSpotter struct {
	w     io.Writer
	found chan<- string
	buf   []byte
	sent  bool
}

func (u *urlSpotter) Write(p []byte) (int, error) {
	if !u.sent {
		u.buf = append(u.buf, p...)
		if url := servingURL.Find(u.buf); url != nil {
			u.found <- string(url)
			u.sent, u.buf = true, nil
		}
	}
	return u.w.Write(p)
}

// etcdServer is a single etcd member on free loopback ports, with its
// default durability (the WAL is fsynced before a write is acknowledged).
type etcdServer struct {
	*proc
	endpoint string
}

func startEtcd(ctx context.Context, etcd, dir string) (*etcdServer, error) {
	client, peer := freePort(), freePort()
	if client == 0 || peer == 0 {
		return nil, errors.New("no free loopback port for etcd")
	}
	cu := fmt.Sprintf("http://127.0.0.1:%d", client)
	pu := fmt.Sprintf("http://127.0.0.1:%d", peer)
	cmd := exec.CommandContext(ctx, etcd,
		"--name", "bench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
		"--initial-cluster", "bench="+pu, "--initial-cluster-state", "new",
		"--quota-backend-bytes", strconv.FormatInt(8<<30, 10),
		"--log-level", "warn", "--logger", "zap")
	cmd.Env = os.Environ()
	p, err := startLogged("etcd", cmd, filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	s := &etcdServer{proc: p, endpoint: fmt.Sprintf("127.0.0.1:%d", client)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := etcdClient(s.endpoint, nil)
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err = c.Status(sctx, s.endpoint)
			cancel()
			c.Close()
			if err == nil {
				return s, nil
			}
		}
		if p.exited() || time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("etcd did not answer within 30s (last: %v); see %s", err, filepath.Join(dir, "etcd.log"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort is a loopback TCP port nothing listens on now (0 if none).
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
