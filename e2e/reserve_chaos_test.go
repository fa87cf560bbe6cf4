package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/reserve/pattern"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
)

// resvTree is the generated tree the processes reserve in: three top
// directories, two below each, three files in each of those.
func resvTree() []string {
	var paths []string
	for _, a := range []string{"a", "b", "c"} {
		paths = append(paths, a)
		for _, x := range []string{"x", "y"} {
			paths = append(paths, a+"/"+x)
			for _, f := range []string{"1.go", "2.go", "3.md"} {
				paths = append(paths, a+"/"+x+"/"+f)
			}
		}
	}
	return paths
}

// resvPool is the patterns the processes draw from: plain files and
// directories, and globs that overlap them and each other.
var resvPool = []string{
	"a/x/1.go", "a/x/2.go", "b/y/3.md", "c/x/1.go", "a/x", "b/y", "c",
	"a/**", "**/1.go", "*/x/*.go", "b/?/2.go", "**/*.md", "c/*/3.md", "a/y/**", "*/y", "b/**/1.go",
}

// TestReserve_TwelveProcessesNeverClash: 12 processes on three host ids
// reserve random overlapping patterns (a third of them shared) with
// baton reserve run for 30 s while every 600 ms one of them is SIGKILLed.
// No path of the tree is ever under two clashing reservations at once, as
// the fenced ledger the commands write shows, every waiter is served, and
// fences rise with the order of grants.
func TestReserve_TwelveProcessesNeverClash(t *testing.T) {
	w := newWorld(t)
	hosts := []*host{w.host("h0"), w.host("h1"), w.host("h2")}
	ledger := filepath.Join(t.TempDir(), "ledger")
	const procs = 12
	run := 30 * time.Second
	if testing.Short() {
		run = 10 * time.Second
	}
	deadline := time.Now().Add(run)
	var mu sync.Mutex
	running := map[int]*exec.Cmd{}
	var served, killed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, procs)
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hosts[p%3]
			for time.Now().Before(deadline) {
				pats := map[string]bool{}
				for range 1 + rand.IntN(3) {
					pats[resvPool[rand.IntN(len(resvPool))]] = true
				}
				args := []string{"reserve", "run", "tree", "--wait", "60s", "--ttl", "3s", "--agent", fmt.Sprintf("p%d", p)}
				var list []string
				for q := range pats {
					list = append(list, q)
				}
				mode := "x"
				if rand.IntN(3) == 0 {
					mode = "s"
					args = append(args, "--shared")
				}
				args = append(append(args, list...), "--", resvtaskBin)
				hold := time.Duration(10+rand.IntN(50)) * time.Millisecond
				cmd := h.command(args...)
				cmd.Env = append(cmd.Env, "RESVLEDGER="+ledger, "HOLD="+hold.String(), "RESV_MODE="+mode, "RESV_PATTERNS="+strings.Join(list, " "))
				var errOut strings.Builder
				cmd.Stderr = &errOut
				if err := cmd.Start(); err != nil {
					errs <- err.Error()
					return
				}
				mu.Lock()
				running[p] = cmd
				mu.Unlock()
				err := cmd.Wait()
				mu.Lock()
				delete(running, p)
				mu.Unlock()
				switch code := exitCode(err); {
				case code == 0:
					served.Add(1)
				case code == 128+int(syscall.SIGKILL):
					killed.Add(1)
				default:
					errs <- fmt.Sprintf("process %d: exit %d: %s", p, code, errOut.String())
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	var kw sync.WaitGroup
	kw.Add(1)
	go func() {
		defer kw.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(600 * time.Millisecond):
			}
			mu.Lock()
			for _, cmd := range running {
				_ = cmd.Process.Kill()
				break
			}
			mu.Unlock()
		}
	}()
	wg.Wait()
	close(stop)
	kw.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	starts, err := checkResvLedger(ledger, resvTree())
	if err != nil {
		t.Fatal(err)
	}
	e, err := w.client.Bucket(sem.BucketConfig(session.DefaultPrefix, 0)).Latest(context.Background(), reserve.Key("tree"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d reservations served to the end, %d killed, %d commands started; the space was written %d times or more", served.Load(), killed.Load(), starts, e.Revision)
	if served.Load() < 5*procs || killed.Load() == 0 {
		t.Fatalf("%d served, %d killed: want many served and some killed", served.Load(), killed.Load())
	}
}

// checkResvLedger reads a resvtask ledger in its order: each reservation
// lives from its S line to its last line. No path of tree may be covered
// by two live reservations unless both are shared, and a reservation that
// started after another that clashes with it ended has the higher fence.
// It returns how many started.
func checkResvLedger(path string, tree []string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	type resv struct {
		id         string
		fence      uint64
		shared     bool
		covers     map[string]bool
		first, end int
	}
	var lines [][]string
	all := map[string]*resv{}
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		fs := strings.Split(sc.Text(), ",")
		lines = append(lines, fs)
		switch {
		case fs[0] == "S" && len(fs) == 6:
			r := &resv{id: fs[1], shared: fs[3] == "s", covers: map[string]bool{}, first: i, end: i}
			if _, err := fmt.Sscan(fs[2], &r.fence); err != nil || r.fence == 0 {
				return 0, fmt.Errorf("line %d: fence %q", i+1, fs[2])
			}
			for _, p := range strings.Fields(fs[4]) {
				pat, err := pattern.Parse(p)
				if err != nil {
					return 0, fmt.Errorf("line %d: %w", i+1, err)
				}
				for _, q := range tree {
					if pat.Covers(q) {
						r.covers[q] = true
					}
				}
			}
			if all[r.id] != nil {
				return 0, fmt.Errorf("line %d: reservation %s started twice", i+1, r.id)
			}
			all[r.id] = r
		case (fs[0] == "W" || fs[0] == "E") && len(fs) == 3:
			r := all[fs[1]]
			if r == nil {
				return 0, fmt.Errorf("line %d: %s before its start", i+1, fs[1])
			}
			r.end = i
		default:
			return 0, fmt.Errorf("line %d: %q", i+1, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	clash := func(a, b *resv) string {
		if a.shared && b.shared {
			return ""
		}
		for p := range a.covers {
			if b.covers[p] {
				return p
			}
		}
		return ""
	}
	list := make([]*resv, 0, len(all))
	for _, r := range all {
		list = append(list, r)
	}
	for i, a := range list {
		for _, b := range list[i+1:] {
			p := clash(a, b)
			if p == "" {
				continue
			}
			if a.first <= b.end && b.first <= a.end {
				return 0, fmt.Errorf("%s (lines %d-%d: %s) and %s (lines %d-%d: %s) both held %s", a.id, a.first+1, a.end+1, strings.Join(lines[a.first], ","),
					b.id, b.first+1, b.end+1, strings.Join(lines[b.first], ","), p)
			}
			before, after := a, b
			if b.first < a.first {
				before, after = b, a
			}
			if after.fence <= before.fence {
				return 0, fmt.Errorf("%s started after %s, which clashes with it, with fence %d <= %d", after.id, before.id, after.fence, before.fence)
			}
		}
	}
	return len(all), nil
}
