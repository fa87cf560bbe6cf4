package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
)

func TestSem_CreateAcquireReleaseStatusAndLs(t *testing.T) {
	w := newWorld(t)
	h1, h2 := w.host("h1"), w.host("h2")
	h1.expect(2, []string{"sem", "create", "db"}, "--max is required")
	h1.must("sem", "create", "db", "--max", "3")
	h2.must("sem", "create", "db", "--max", "3") // the same again: nothing changes
	h2.expect(3, []string{"sem", "create", "db", "--max", "4"}, "exists with max 3")
	h1.expect(2, []string{"sem", "create", "a.b", "--max", "1"}, "semaphore name")
	h1.expect(5, []string{"sem", "acquire", "nope"}, "baton sem create nope")

	a := jsonOf(t, h1.must("sem", "acquire", "db", "--weight", "2", "--ttl", "60s", "--json").stdout)
	if num(t, a, "index") != 0 || num(t, a, "weight") != 2 || a["host"] != "h1" {
		t.Fatalf("first permit: %v", a)
	}
	b := jsonOf(t, h2.must("sem", "acquire", "db", "--json").stdout)
	if num(t, b, "index") != 2 || num(t, b, "fence") <= num(t, a, "fence") {
		t.Fatalf("second permit: %v (first %v)", b, a)
	}
	h2.expect(3, []string{"sem", "acquire", "db"}, "0 of 3 units free", "--wait")
	h2.expect(3, []string{"sem", "run", "db", "--wait", "0", "--", "true"}, "0 of 3 units free")
	h2.expect(3, []string{"sem", "run", "db", "--wait", "200ms", "--", "true"}, "waited 200ms")
	st := jsonOf(t, h2.must("sem", "status", "db", "--json").stdout)
	if num(t, st, "held") != 3 || num(t, st, "free") != 0 || len(st["holders"].([]any)) != 2 {
		t.Fatalf("status: %v", st)
	}
	if out := h1.must("sem", "ls").stdout; !strings.Contains(out, "\ndb ") || strings.Join(strings.Fields(strings.Split(out, "\n")[1]), " ") != "db (all) 3 3 0 2 0" {
		t.Fatalf("ls:\n%s", out)
	}

	// A waiter is served when a permit is released.
	waiter := h2.command("sem", "acquire", "db", "--wait", "20s", "--json")
	var out strings.Builder
	waiter.Stdout = &out
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the waiter in line", func() bool {
		st := jsonOf(t, h1.must("sem", "status", "db", "--json").stdout)
		ws := st["waiters"].([]any)
		return len(ws) == 1 && ws[0].(map[string]any)["host"] == "h2"
	})
	if out := h1.must("sem", "status", "db").stdout; !strings.Contains(out, "1 waiting") || !strings.Contains(out, "waiting, first first") {
		t.Fatalf("status with a waiter:\n%s", out)
	}
	h1.expect(2, []string{"sem", "release", "db"}, "--permit is required")
	if r := h1.must("sem", "release", "db", "--permit", a["permit"].(string)); !strings.Contains(r.stdout, "released db") {
		t.Fatalf("release: %s", r)
	}
	if err := waiter.Wait(); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if c := jsonOf(t, out.String()); num(t, c, "index") > 1 {
		t.Fatalf("the waiter's permit: %v; want index 0 or 1, freed by the release", c)
	}
	if r := h1.must("sem", "release", "db", "--permit", a["permit"].(string)); !strings.Contains(r.stdout, "nothing to release") {
		t.Fatalf("release again: %s", r)
	}
}

// TestSem_PerHostCapsEachHostApart: a per-host semaphore of 1 runs one
// command at a time on each host, and both hosts at once.
func TestSem_PerHostCapsEachHostApart(t *testing.T) {
	w := newWorld(t)
	h1, h2 := w.host("h1"), w.host("h2")
	if r := h1.must("sem", "create", "cpu", "--max", "1", "--per-host"); !strings.Contains(r.stdout, "max 1 on each host") {
		t.Fatalf("create: %s", r)
	}
	h2.expect(3, []string{"sem", "create", "cpu", "--max", "1"}, "exists with max 1 on each host")
	release := filepath.Join(t.TempDir(), "release")
	holders := map[string]*exec.Cmd{}
	for _, h := range []*host{h1, h2} {
		c := h.command("sem", "run", "cpu", "--", "sh", "-c", `echo "$BATON_SEM_INDEX" > `+release+`.`+h.id+`; while [ ! -e `+release+` ]; do sleep 0.05; done`)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		holders[h.id] = c
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	waitFor(t, 10*time.Second, "both hosts running", func() bool {
		a, _ := os.ReadFile(release + ".h1")
		b, _ := os.ReadFile(release + ".h2")
		return string(a) == "0\n" && string(b) == "0\n"
	})
	h1.expect(3, []string{"sem", "acquire", "cpu"}, "0 of 1 units free")
	st := jsonOf(t, h2.must("sem", "status", "cpu", "--json").stdout)
	if st["per_host"] != true || st["host"] != "h2" || num(t, st, "held") != 1 || num(t, st, "max") != 1 {
		t.Fatalf("h2's status: %v", st)
	}
	out := h1.must("sem", "ls").stdout
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 3 || strings.Join(strings.Fields(rows[1]), " ") != "cpu h1 1 1 0 1 0" || strings.Join(strings.Fields(rows[2]), " ") != "cpu h2 1 1 0 1 0" {
		t.Fatalf("ls:\n%s", out)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for id, c := range holders {
		if err := c.Wait(); err != nil {
			t.Errorf("%s's sem run: %v", id, err)
		}
	}
	h1.must("sem", "acquire", "cpu", "--ttl", "5s")
}

func TestSem_RunExportsThePermitAndPassesTheExitCode(t *testing.T) {
	w := newWorld(t)
	h := w.host("h1")
	h.must("sem", "create", "ports", "--max", "4")
	r := h.baton("sem", "run", "ports", "--weight", "2", "--", "sh", "-c",
		`echo "$BATON_SEM $BATON_SEM_INDEX $BATON_SEM_UNITS $BATON_FENCE $BATON_PERMIT"; exit 7`)
	f := strings.Fields(r.stdout)
	if r.code != 7 || len(f) != 5 || f[0] != "ports" || f[1] != "0" || f[2] != "0,1" || f[3] == "0" || f[4] == "" {
		t.Fatalf("run: %s", r)
	}
	if st := jsonOf(t, h.must("sem", "status", "ports", "--json").stdout); num(t, st, "held") != 0 {
		t.Fatalf("after run: %v; want its permit released", st)
	}
}

func TestSem_RunStopsTheCommandWhenThePermitIsLost(t *testing.T) {
	w := newWorld(t)
	h := w.host("h1")
	h.must("sem", "create", "one", "--max", "1")
	cmd := h.command("sem", "run", "one", "--ttl", "3s", "--grace", "1s", "--", "sleep", "300")
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	bucket := w.client.Bucket(semBucket())
	waitFor(t, 10*time.Second, "the permit's unit", func() bool {
		_, err := bucket.Get(context.Background(), "sem.one.0")
		return err == nil
	})
	// Removed by hand, at the revision read: sem run rewrites the unit once
	// its command has started (to name it), so a delete may lose to that.
	waitFor(t, 10*time.Second, "the unit removed", func() bool {
		e, err := bucket.Get(context.Background(), "sem.one.0")
		return err == nil && bucket.Delete(context.Background(), "sem.one.0", e.Revision, nil) == nil
	})
	err := cmd.Wait()
	if code := exitCode(err); code != 3 || !strings.Contains(errOut.String(), "permit") {
		t.Fatalf("sem run whose unit was removed: exit %d, stderr %s; want 3 and the loss said", code, errOut.String())
	}
}

// A holder killed with SIGKILL: its units come back at once to a waiter
// of its host (TTL 30s), and to a waiter elsewhere when the TTL ends.
func TestSem_AKilledHoldersUnitsComeBack(t *testing.T) {
	w := newWorld(t)
	h1, h2 := w.host("h1"), w.host("h2")
	for _, tc := range []struct {
		name   string
		waiter *host
		ttl    time.Duration
		within time.Duration
	}{
		{"same-host", h1, 30 * time.Second, 500 * time.Millisecond},
		{"other-host", h2, 2 * time.Second, 2*time.Second + 400*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h1.must("sem", "create", tc.name, "--max", "1")
			holder := h1.command("sem", "run", tc.name, "--ttl", tc.ttl.String(), "--", "sleep", "300")
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the holder's permit", func() bool {
				st := jsonOf(t, h1.must("sem", "status", tc.name, "--json").stdout)
				hs := st["holders"].([]any)
				return len(hs) == 1 && hs[0].(map[string]any)["pid"] != nil
			})
			waiter := tc.waiter.command("sem", "acquire", tc.name, "--wait", "60s", "--ttl", "60s")
			var out strings.Builder
			waiter.Stdout = &out
			if err := waiter.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // the waiter is waiting
			killed := time.Now()
			_ = holder.Process.Kill()
			_ = holder.Wait()
			if err := waiter.Wait(); err != nil {
				t.Fatalf("waiter: %v", err)
			}
			took := time.Since(killed)
			t.Logf("%s: SIGKILL to the waiter's permit: %s (TTL %s)", tc.name, took, tc.ttl)
			if took > tc.within {
				t.Fatalf("%s: the waiter was served %s after the holder's SIGKILL; want within %s", tc.name, took, tc.within)
			}
		})
	}
}

// Twenty processes on three host ids take permits of weight 1-3 of a
// semaphore of max 5 over and over for 30 s, each holding it while a
// command writes to a ledger, and some are killed with SIGKILL: in the
// ledger's order, the commands alive at once never hold more than 5 units
// or a unit twice, and every process not killed is served.
func TestSem_TwentyProcessesNeverHoldMoreThanMax(t *testing.T) {
	w := newWorld(t)
	hosts := []*host{w.host("h0"), w.host("h1"), w.host("h2")}
	hosts[0].must("sem", "create", "suite", "--max", "5")
	ledger := filepath.Join(t.TempDir(), "ledger")
	const procs = 20
	run := 30 * time.Second
	if testing.Short() {
		run = 10 * time.Second
	}
	deadline := time.Now().Add(run)
	var mu sync.Mutex
	running := map[int]*exec.Cmd{} // proc -> its baton, while one runs
	var served, killed, failed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, procs)
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hosts[p%3]
			weight := 1 + p%3
			for time.Now().Before(deadline) {
				hold := time.Duration(20+rand.IntN(60)) * time.Millisecond
				cmd := h.command("sem", "run", "suite", "--weight", strconv.Itoa(weight), "--wait", "60s", "--ttl", "2s",
					"--", semtaskBin)
				cmd.Env = append(cmd.Env, "SEMLEDGER="+ledger, "HOLD="+hold.String())
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
					failed.Add(1)
					errs <- fmt.Sprintf("process %d: exit %d: %s", p, code, errOut.String())
					return
				}
			}
		}()
	}
	// Every 700 ms one running baton is killed.
	stop := make(chan struct{})
	var kw sync.WaitGroup
	kw.Add(1)
	go func() {
		defer kw.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(700 * time.Millisecond):
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
	starts, err := checkSemLedger(ledger, 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d permits served to the end, %d killed, %d commands started", served.Load(), killed.Load(), starts)
	if served.Load() < procs || killed.Load() == 0 {
		t.Fatalf("%d served, %d killed: want every process served and some killed", served.Load(), killed.Load())
	}
}

// checkSemLedger reads a semtask ledger in its order: each permit lives
// from its S line to its last line. At every line the permits alive hold
// at most max units, and no unit twice. It returns how many started.
func checkSemLedger(path string, max int) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	type permit struct {
		units      []int
		first, end int
	}
	var order []string
	permits := map[string]*permit{}
	var lines [][]string
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		fs := strings.Split(sc.Text(), ",")
		lines = append(lines, fs)
		if len(fs) < 3 {
			return 0, fmt.Errorf("ledger line %d: %q", i+1, sc.Text())
		}
		p, ok := permits[fs[1]]
		switch {
		case fs[0] == "S" && !ok && len(fs) == 5:
			p = &permit{first: i}
			for _, u := range strings.Split(fs[3], "-") {
				n, err := strconv.Atoi(u)
				if err != nil {
					return 0, fmt.Errorf("ledger line %d: units %q", i+1, fs[3])
				}
				p.units = append(p.units, n)
			}
			permits[fs[1]] = p
			order = append(order, fs[1])
		case !ok:
			return 0, fmt.Errorf("ledger line %d: permit %s writes before it started", i+1, fs[1])
		}
		p.end = i
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	// Sweep the lines: a permit enters at its first and leaves after its end.
	held := map[int]string{}
	leaving := map[int][]string{}
	for _, id := range order {
		leaving[permits[id].end] = append(leaving[permits[id].end], id)
	}
	for i, fs := range lines {
		if fs[0] == "S" {
			p := permits[fs[1]]
			for _, u := range p.units {
				if other, ok := held[u]; ok {
					return 0, fmt.Errorf("ledger line %d: permit %s starts on unit %d while permit %s still works on it", i+1, fs[1], u, other)
				}
				if u >= max {
					return 0, fmt.Errorf("ledger line %d: permit %s holds unit %d of a semaphore of %d", i+1, fs[1], u, max)
				}
				held[u] = fs[1]
			}
			if len(held) > max {
				return 0, fmt.Errorf("ledger line %d: %d units held at once", i+1, len(held))
			}
		}
		for _, id := range leaving[i] {
			for _, u := range permits[id].units {
				delete(held, u)
			}
		}
	}
	return len(order), nil
}

// semBucket is the limits bucket of the default prefix.
func semBucket() kv.BucketConfig { return sem.BucketConfig(session.DefaultPrefix, 0) }

// The ledger check finds what it is there to find.
func TestCheckSemLedger(t *testing.T) {
	for _, tc := range []struct {
		name, ledger string
		bad          bool
	}{
		{"apart", "S,a,1,0-1,1\nW,a,2\nE,a,3\nS,b,4,0,4\nE,b,5\n", false},
		{"side by side", "S,a,1,0-1,1\nS,b,4,2-3-4,4\nE,a,3\nE,b,5\n", false},
		{"a unit twice", "S,a,1,0-1,1\nS,b,4,1,4\nE,a,3\nE,b,5\n", true},
		{"the killed one wrote on", "S,a,1,0,1\nS,b,4,0,4\nW,a,5\nE,b,6\n", true},
		{"past max", "S,a,1,5,1\nE,a,2\n", true},
		{"no start", "W,a,1\n", true},
	} {
		path := filepath.Join(t.TempDir(), "ledger")
		if err := os.WriteFile(path, []byte(tc.ledger), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := checkSemLedger(path, 5); (err != nil) != tc.bad {
			t.Errorf("%s: check = %v, want a problem: %v", tc.name, err, tc.bad)
		}
	}
}
