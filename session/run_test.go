package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/session"
)

// shell returns a start function running script in sh, with the session's
// fence in BATON_FENCE, that waits until the script prints its first line.
func shell(t *testing.T, script string) func(*session.Session) (session.Child, error) {
	return func(s *session.Session) (session.Child, error) {
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), fmt.Sprintf("BATON_FENCE=%d", s.Fence))
		// A pipe of our own: the group's Wait must not close it under us.
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		defer r.Close()
		cmd.Stdout = w
		g, err := hostlocal.StartGroup(cmd)
		w.Close()
		if err != nil {
			return nil, err
		}
		if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
			t.Errorf("child said nothing: %v", err)
		}
		return g, nil
	}
}

func tombstoneResult(t *testing.T, m *session.Manager, slot string) string {
	t.Helper()
	last, err := m.Bucket().Latest(context.Background(), slot)
	if err != nil || last.Op != kv.OpDelete {
		t.Fatalf("no tombstone for %s: %+v, %v", slot, last, err)
	}
	var r session.Record
	json.Unmarshal(last.Value, &r)
	return r.Result
}

func TestRun_ExitCodeIsTheWorksAndClosesTheSession(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	res, err := m.Run(ctx, "slot", "T1", shell(t, `echo started; test "$BATON_FENCE" -gt 0 || exit 99; exit 7`))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.ExitCode != 7 {
		t.Errorf("exit code %d, want 7", res.ExitCode)
	}
	if got := tombstoneResult(t, m, "slot"); got != "fail" {
		t.Errorf("result %q, want fail", got)
	}
	res, err = m.Run(ctx, "slot", "T2", shell(t, "echo started"))
	if err != nil || res.ExitCode != 0 || tombstoneResult(t, m, "slot") != "success" {
		t.Errorf("second run: %+v, %v; want exit 0 and result success", res, err)
	}
}

func TestRun_RenewsPastItsTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs past a TTL")
	}
	ctx := ctxT(t)
	e := newEnv(t)
	var mu sync.Mutex
	var observed []string // each renewal the hook was told of: its slot, and its error
	m := e.manager("h1", t.TempDir(), session.WithRenewHook(func(slot string, took time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		observed = append(observed, fmt.Sprintf("%s %v", slot, err))
		if took <= 0 {
			t.Errorf("a renewal of %s took %s", slot, took)
		}
	}))
	res, err := m.Run(ctx, "slot", "T1", shell(t, "echo started; sleep 3"),
		session.WithJoinOptions(session.WithTTL(time.Second)))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run of 3s with a 1s TTL: %+v, %v", res, err)
	}
	if res.Session.Renewals < 6 {
		t.Errorf("%d renewals in 3s with a 1s TTL, want at least 6", res.Session.Renewals)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(observed) != int(res.Session.Renewals) {
		t.Errorf("the renew hook was told of %d renewals, the session counts %d", len(observed), res.Session.Renewals)
	}
	for _, o := range observed {
		if o != "slot <nil>" {
			t.Errorf("the renew hook was told %q, want slot <nil>", o)
		}
	}
}

func TestRun_LosingTheSessionStopsTheWork(t *testing.T) {
	for _, how := range []string{"close", "takeover"} {
		t.Run(how, func(t *testing.T) {
			ctx := ctxT(t)
			e := newEnv(t)
			dir := t.TempDir()
			m := e.manager("h1", dir)
			marker := filepath.Join(t.TempDir(), "term")
			script := fmt.Sprintf(`trap 'echo term > %s; exit 0' TERM; echo started; while :; do sleep 0.05; done`, marker)
			done := make(chan error, 1)
			started := make(chan struct{})
			go func() {
				_, err := m.Run(ctx, "slot", "T1", func(s *session.Session) (session.Child, error) {
					c, err := shell(t, script)(s)
					close(started)
					return c, err
				}, session.WithGrace(5*time.Second))
				done <- err
			}()
			<-started
			other := e.manager("h1", dir)
			var want string
			switch how {
			case "close":
				s, err := other.Resume(ctx, "slot")
				if err != nil {
					t.Fatal(err)
				}
				if err := other.Close(ctx, s, "success"); err != nil {
					t.Fatal(err)
				}
				want = session.LostClosed
			case "takeover":
				if _, err := other.Join(ctx, "slot", "T2", session.WithForce(true), session.WithWait(5*time.Second)); err != nil {
					t.Fatal(err)
				}
				want = session.LostTaken
			}
			var lost *session.LostError
			select {
			case err := <-done:
				if !errors.As(err, &lost) {
					t.Fatalf("run: %v, want ErrLost", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("run did not stop")
			}
			if lost.How != want {
				t.Errorf("lost %q, want %q", lost.How, want)
			}
			if b, err := os.ReadFile(marker); err != nil || !strings.Contains(string(b), "term") {
				t.Errorf("the work did not get SIGTERM: %q, %v", b, err)
			}
		})
	}
}

func TestRun_ServerGoneStopsTheWorkBeforeTheTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a TTL")
	}
	e := newEnv(t)
	cutOffStopsDeafWork(t, e.manager("h1", t.TempDir()), "the server went away", e.srv.Shutdown, func() {})
}

// A link that goes dead without closing (no reset: the client notices only
// by its own timeouts) must not hold up the stop either: nothing the run
// still waits on over that link may come before stopping the work.
func TestRun_DeadLinkStopsTheWorkBeforeTheTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a TTL")
	}
	e := newEnv(t)
	px := kvtest.NewStallProxy(t, strings.TrimPrefix(e.srv.ClientURL(), "nats://"))
	c := kvtest.Connect(t, px.URL(), kv.WithTimeout(time.Second))
	sd, err := hostlocal.OpenStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := session.NewManager(c, session.WithHostID("h1"), session.WithStateDir(sd))
	if err != nil {
		t.Fatal(err)
	}
	cutOffStopsDeafWork(t, m, "the link went dead", px.Stall, px.Resume)
}

// cutOffStopsDeafWork runs work that ignores SIGTERM under m with a 2s TTL
// and a minute's grace, then cuts m off from its server with cut: the
// work, which only the SIGKILL ends, must be dead before the server could
// have expired the session (the TTL from the last renewal, which came
// before the cut), whatever the grace; the run then reports the session
// lost, not renewed in time. heal undoes the cut.
func cutOffStopsDeafWork(t *testing.T, m *session.Manager, what string, cut, heal func()) {
	t.Helper()
	ctx := ctxT(t)
	const ttl = 2 * time.Second
	done := make(chan error, 1)
	started := make(chan *hostlocal.Group, 1)
	go func() {
		_, err := m.Run(ctx, "slot", "T1", func(s *session.Session) (session.Child, error) {
			c, err := shell(t, `trap '' TERM; echo started; while :; do sleep 0.05; done`)(s)
			started <- c.(*hostlocal.Group)
			return c, err
		}, session.WithJoinOptions(session.WithTTL(ttl)), session.WithGrace(time.Minute))
		done <- err
	}()
	g := <-started
	at := time.Now()
	cut()
	<-g.Done()
	if took := time.Since(at); took >= ttl {
		t.Errorf("work killed %s after %s; TTL is %s", took, what, ttl)
	}
	heal()
	select {
	case err := <-done:
		var lost *session.LostError
		if !errors.As(err, &lost) || lost.How != session.LostUnrenewed {
			t.Fatalf("run: %v, want lost: not renewed in time", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run went on without its server")
	}
}

func TestRun_ForwardsSignalsAndClosesTheSession(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	sigs := make(chan os.Signal, 1)
	done := make(chan session.RunResult, 1)
	started := make(chan struct{})
	go func() {
		res, err := m.Run(ctx, "slot", "T1", func(s *session.Session) (session.Child, error) {
			c, err := shell(t, `trap 'exit 130' INT; echo started; while :; do sleep 0.05; done`)(s)
			close(started)
			return c, err
		}, session.WithSignals(sigs))
		if err != nil {
			t.Errorf("run: %v", err)
		}
		done <- res
	}()
	<-started
	sigs <- syscall.SIGINT
	res := <-done
	if res.ExitCode != 130 {
		t.Errorf("exit code %d, want 130", res.ExitCode)
	}
	if got := tombstoneResult(t, m, "slot"); got != "fail" {
		t.Errorf("result %q, want fail", got)
	}
}

func TestRun_JoinRefusalStartsNothing(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	if _, err := e.manager("h2", t.TempDir()).Join(ctx, "slot", "T0"); err != nil {
		t.Fatal(err)
	}
	startedWork := false
	_, err := e.manager("h1", t.TempDir()).Run(ctx, "slot", "T1", func(*session.Session) (session.Child, error) {
		startedWork = true
		return nil, errors.New("unreachable")
	})
	if !errors.Is(err, session.ErrForeignHost) || startedWork {
		t.Errorf("run on another host's slot: %v (started: %v), want ErrForeignHost and nothing started", err, startedWork)
	}
}

func TestRun_StopsWhatTheWorkLeftRunningBeforeClosing(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	var leftover int
	res, err := m.Run(ctx, "slot", "T1", func(s *session.Session) (session.Child, error) {
		cmd := exec.Command("sh", "-c", "sleep 300 & echo $!; exit 0")
		r, w, _ := os.Pipe()
		defer r.Close()
		cmd.Stdout = w
		g, err := hostlocal.StartGroup(cmd)
		w.Close()
		if err != nil {
			return nil, err
		}
		fmt.Fscan(r, &leftover)
		return g, nil
	}, session.WithGrace(5*time.Second))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	if leftover == 0 || (hostlocal.Process{PID: leftover}).Alive() {
		t.Errorf("the background process %d outlived the run and its session", leftover)
	}
}
