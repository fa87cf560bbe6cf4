package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stuckAfter is how long an operation may take before it counts as stuck:
// it neither succeeded nor failed clearly.
const stuckAfter = 30 * time.Second

// result is one finished CLI call.
type result struct {
	code           int
	stdout, stderr string
	start, end     time.Time
	stuck          bool
	what           string // names the operation when it is stuck
}

// env is what every baton process of the run gets: the cluster and a host.
func (h *harness) env(host string) []string {
	url := h.cl.urls()
	if host == slowHost {
		url = h.px.urls()
	}
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + h.hostDir(host),
		"BATON_STATE_DIR=" + h.hostDir(host),
		"BATON_HOST_ID=" + host,
		"BATON_URL=" + url,
		"BATON_TIMEOUT=3s",
		"BATON_KV_TRACE=" + h.tr.hostFile(host),
	}
}

// cli runs one short baton verb for host and waits for it; after stuckAfter
// it is killed and counted as stuck.
func (h *harness) cli(host string, args ...string) result {
	cmd := h.net.command(host, h.bin, args...)
	cmd.Env = h.env(host)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r := result{start: time.Now()}
	if err := cmd.Start(); err != nil {
		r.code, r.stderr, r.end = -1, err.Error(), time.Now()
		return r
	}
	var err error
	exited := make(chan struct{})
	go func() { err = cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(stuckAfter):
		r.stuck = true
		quitThenKill(cmd.Process, exited)
	}
	r.end = time.Now()
	r.code = exitCode(err)
	r.stdout, r.stderr = out.String(), errb.String()
	r.what = strings.Join(append([]string{"baton"}, args...), " ") + " on " + host
	if r.stuck { // keep what it printed, with its goroutines (SIGQUIT)
		_ = os.WriteFile(filepath.Join(h.dir, "clients", fmt.Sprintf("stuck-%s-%d.log", args[0], r.start.UnixNano())), []byte(r.stderr), 0o600)
	}
	h.stats.op(args[0], r)
	return r
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		return -1
	}
}

// daemon is a long-running baton process (run or lead) that faults can be
// injected into.
type daemon struct {
	actor  string
	host   string
	verb   string
	ttl    time.Duration
	cmd    *exec.Cmd
	exited chan struct{}
	code   int

	key     string // the resource its command writes to
	mu      sync.Mutex
	stopped bool // SIGSTOPped now
	hit     bool // a client fault paused or killed it
}

// faulted reports whether a client fault paused or killed d.
func (d *daemon) faulted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hit
}

// kill SIGKILLs d as a client fault.
func (d *daemon) kill() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hit = true
	return d.cmd.Process.Kill() == nil
}

// spawn starts a long-running baton process for actor on host.
func (h *harness) spawn(actor, host string, ttl time.Duration, args ...string) (*daemon, error) {
	cmd := h.net.command(host, h.bin, args...)
	cmd.Env = append(h.env(host), "FAULT_ACTOR="+actor, "FAULT_CHECKER="+h.checkerURL, "FAULT_QUEUE="+h.queueURL, "FAULT_SEM="+h.semURL, "FAULT_RESV="+h.resvURL)
	logf, err := os.Create(filepath.Join(h.dir, "clients", actor+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{actor: actor, host: host, verb: args[0], ttl: ttl, cmd: cmd, exited: make(chan struct{})}
	go func() {
		d.code = exitCode(cmd.Wait())
		close(d.exited)
	}()
	h.track(d)
	return d, nil
}

// finish asks d to stop (SIGTERM, and SIGCONT in case it is paused) and
// waits; it reports whether d ended within stuckAfter (then it is killed).
func (d *daemon) finish() bool {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	d.cont()
	select {
	case <-d.exited:
		return true
	case <-time.After(stuckAfter):
		quitThenKill(d.cmd.Process, d.exited)
		return false
	}
}

// quitThenKill sends a stuck process SIGQUIT, so that a Go program prints
// its goroutines to its stderr, then SIGKILL after 2 s; it returns once
// exited is closed.
func quitThenKill(p *os.Process, exited <-chan struct{}) {
	_ = p.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		_ = p.Kill()
		<-exited
	}
}

func (d *daemon) pause() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || d.cmd.Process.Signal(syscall.SIGSTOP) != nil {
		return false
	}
	d.stopped, d.hit = true, true
	return true
}

func (d *daemon) cont() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		_ = d.cmd.Process.Signal(syscall.SIGCONT)
		d.stopped = false
	}
}

func (d *daemon) alive() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// sleep waits d or until ctx ends; it reports whether the whole time passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
