package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/session"
)

// leader is the current leader of key, or nil.
func (w *world) leader(t testing.TB, key string) *lease.Info {
	t.Helper()
	ls, err := lease.New(w.client, lease.WithInstance("e2e-observer"), lease.WithHostID("e2e"))
	if err != nil {
		t.Fatal(err)
	}
	el, err := ls.Election(key)
	if err != nil {
		t.Fatal(err)
	}
	in, err := el.Leader(context.Background())
	if errors.Is(err, lease.ErrNoLeader) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// awaitLeader polls (every 5 ms) until cond holds for the leader of key,
// and returns it with the time it was seen.
func (w *world) awaitLeader(t testing.TB, key string, within time.Duration, what string, cond func(*lease.Info) bool) (*lease.Info, time.Time) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if in := w.leader(t, key); cond(in) {
			return in, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lead starts `baton lead key args... -- argv...` as instance on h.
func (h *host) lead(t *testing.T, instance, key string, args []string, env []string, argv ...string) *exec.Cmd {
	t.Helper()
	all := append([]string{"lead", key}, args...)
	all = append(append(all, "--"), argv...)
	cmd := h.command(all...)
	cmd.Env = append(append(cmd.Env, "BATON_INSTANCE="+instance), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("baton lead %s as %s said:\n%s", key, instance, stderr)
		}
	})
	return cmd
}

// ledgerCmd is the fenced writer (see ledgerMain) as a lead command,
// behind a shell that runs it in the background: stopping the shell alone
// would leave the writer running, so only stopping the whole process group
// stops it.
func ledgerCmd(path string) ([]string, []string) {
	return []string{"sh", "-c", `"$0" & wait`, os.Args[0]}, []string{envHelper + "=ledger", "LEDGER=" + path}
}

type write struct {
	fence    uint64
	instance string
	at       time.Time
}

func readLedger(t *testing.T, path string) []write {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []write
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), ",")
		if len(p) != 3 {
			t.Fatalf("ledger line %q", sc.Text())
		}
		fence, _ := strconv.ParseUint(p[0], 10, 64)
		ns, _ := strconv.ParseInt(p[2], 10, 64)
		out = append(out, write{fence: fence, instance: p[1], at: time.Unix(0, ns)})
	}
	return out
}

// fencesOf is the fences that wrote, in the order they first wrote. The
// writer refuses (and sends to .rejected) a lower fence than it has seen,
// so it is the rejections that show two leaders active at once: a command
// of a former leader still running tries a write every 20 ms.
func fencesOf(ws []write) []uint64 {
	var out []uint64
	for _, w := range ws {
		if len(out) == 0 || out[len(out)-1] != w.fence {
			out = append(out, w.fence)
		}
	}
	return out
}

func TestLead_FencesHoldThroughRepeatedLeaderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills leaders")
	}
	w := newWorld(t)
	ledger := filepath.Join(t.TempDir(), "ledger")
	argv, env := ledgerCmd(ledger)
	hosts := []*host{w.host("host-a"), w.host("host-b")}
	procs := map[string]*exec.Cmd{}
	start := func(instance string, h *host) {
		procs[instance] = h.lead(t, instance, "ledger-bot", []string{"--ttl", "2s", "--grace", "1s"}, env, argv...)
	}
	for i := range 5 {
		start(fmt.Sprintf("i%d", i), hosts[i%2])
	}
	const rounds = 4
	for round := range rounds {
		cur, _ := w.awaitLeader(t, "ledger-bot", 10*time.Second, "a leader", func(in *lease.Info) bool { return in != nil && in.ChildPID != 0 })
		waitFor(t, 10*time.Second, "the leader's command writes a while", func() bool {
			n := 0
			for _, w := range readLedger(t, ledger) {
				if w.fence == cur.Fence {
					n++
				}
			}
			return n >= 5
		})
		victim := procs[cur.Holder]
		if round == 1 {
			// Kill the command's supervisor instead: the shell it runs dies
			// with it, the writer behind the shell lives on in the group,
			// and no one may lead until the whole group is gone.
			syscall.Kill(cur.ChildPID, syscall.SIGKILL)
		} else {
			victim.Process.Kill() // SIGKILL of baton lead: no goodbye
		}
		victim.Wait()
		delete(procs, cur.Holder)
		// Keep five candidates: a new instance on the victim's host.
		h := hosts[0]
		if cur.Host == "host-b" {
			h = hosts[1]
		}
		start(fmt.Sprintf("r%d", round), h)
		w.awaitLeader(t, "ledger-bot", 10*time.Second, "a new leader", func(in *lease.Info) bool {
			return in != nil && in.Holder != cur.Holder && in.Fence > cur.Fence
		})
	}
	// Let the last leader write, then check the whole story.
	last, _ := w.awaitLeader(t, "ledger-bot", 10*time.Second, "a leader", func(in *lease.Info) bool { return in != nil })
	waitFor(t, 10*time.Second, "the last leader writes", func() bool {
		ws := readLedger(t, ledger)
		return len(ws) > 0 && ws[len(ws)-1].fence == last.Fence
	})
	ws := readLedger(t, ledger)
	fences := fencesOf(ws)
	t.Logf("%d writes by %d leaders in turn: fences %v", len(ws), len(fences), fences)
	if len(fences) < rounds+1 {
		t.Errorf("%d leaders wrote, want at least %d", len(fences), rounds+1)
	}
	if rej := readLedger(t, ledger+".rejected"); len(rej) > 0 {
		t.Errorf("%d writes with a stale fence were tried (first %+v): a killed leader's command outlived it", len(rej), rej[0])
	}
}

func TestLead_SIGKILLFailover(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ttl      time.Duration
		sameHost bool
		within   time.Duration
	}{
		{"another host within the TTL and the server's tick", 2 * time.Second, false, 2*time.Second + 400*time.Millisecond},
		{"the same host at once whatever the TTL", 10 * time.Second, true, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			a, b := w.host("host-a"), w.host("host-b")
			if tc.sameHost {
				b = &host{w: w, id: "host-a", state: a.state}
			}
			ttl := tc.ttl.String()
			leader := a.lead(t, "first", "k", []string{"--ttl", ttl}, nil, "sleep", "300")
			w.awaitLeader(t, "k", 10*time.Second, "first leads", func(in *lease.Info) bool { return in != nil && in.Holder == "first" && in.ChildPID != 0 })
			b.lead(t, "second", "k", []string{"--ttl", ttl}, nil, "sleep", "300")
			waitFor(t, 10*time.Second, "second is a candidate", func() bool {
				_, err := lease.New(w.client)
				return err == nil && w.candidates(t, "k") == 2
			})
			killed := time.Now()
			leader.Process.Kill()
			_, at := w.awaitLeader(t, "k", tc.within+5*time.Second, "second leads", func(in *lease.Info) bool { return in != nil && in.Holder == "second" })
			if d := at.Sub(killed); d > tc.within {
				t.Errorf("second led %s after the leader was killed; want within %s", d, tc.within)
			} else {
				t.Logf("failover in %s", d)
			}
		})
	}
}

func (w *world) candidates(t testing.TB, key string) int {
	ls, err := lease.New(w.client, lease.WithInstance("e2e-observer"), lease.WithHostID("e2e"))
	if err != nil {
		t.Fatal(err)
	}
	el, _ := ls.Election(key)
	cs, _ := el.Candidates(context.Background())
	return len(cs)
}

func TestLead_APausedLeaderIsReplacedAndItsLateWritesAreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a TTL")
	}
	w := newWorld(t)
	ledger := filepath.Join(t.TempDir(), "ledger")
	argv, env := ledgerCmd(ledger)
	a, b := w.host("host-a"), w.host("host-b")
	old := a.lead(t, "old", "k", []string{"--ttl", "2s", "--grace", "1s"}, env, argv...)
	first, _ := w.awaitLeader(t, "k", 10*time.Second, "old leads", func(in *lease.Info) bool { return in != nil && in.Holder == "old" && in.ChildPID != 0 })
	b.lead(t, "new", "k", []string{"--ttl", "2s", "--grace", "1s"}, env, argv...)
	waitFor(t, 10*time.Second, "new is a candidate", func() bool { return w.candidates(t, "k") == 2 })

	// Pause the leader (not its command) past its TTL.
	old.Process.Signal(syscall.SIGSTOP)
	second, _ := w.awaitLeader(t, "k", 10*time.Second, "new leads", func(in *lease.Info) bool { return in != nil && in.Holder == "new" })
	waitFor(t, 10*time.Second, "the paused leader's command tries a late write", func() bool {
		return len(readLedger(t, ledger+".rejected")) > 0
	})
	// Resumed, the old leader stops its command at once.
	old.Process.Signal(syscall.SIGCONT)
	oldChild := first.ChildPID
	resumed := time.Now()
	waitFor(t, 5*time.Second, "the old leader's command stops", func() bool { return !alive(oldChild) })
	t.Logf("old command stopped %s after SIGCONT", time.Since(resumed))

	for _, r := range readLedger(t, ledger+".rejected") {
		if r.fence != first.Fence {
			t.Errorf("rejected write with fence %d, want only the old fence %d", r.fence, first.Fence)
		}
	}
	if f := fencesOf(readLedger(t, ledger)); len(f) != 2 || f[0] != first.Fence || f[1] != second.Fence {
		t.Errorf("fences that wrote: %v, want %d then %d", f, first.Fence, second.Fence)
	}
}

func TestLead_GracefulEndsHandOverAtOnce(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	stamp := filepath.Join(t.TempDir(), "ended")
	// The leader's command ends on its own: baton hands leadership over.
	first := a.lead(t, "first", "k", []string{"--ttl", "5s"}, nil, "sh", "-c",
		fmt.Sprintf(`while [ ! -e %s.go ]; do sleep 0.01; done; date +%%s%%N > %s; exit 0`, stamp, stamp))
	w.awaitLeader(t, "k", 10*time.Second, "first leads", func(in *lease.Info) bool { return in != nil && in.Holder == "first" })
	b.lead(t, "second", "k", []string{"--ttl", "5s"}, nil, "sleep", "300")
	waitFor(t, 10*time.Second, "second is a candidate", func() bool { return w.candidates(t, "k") == 2 })
	if err := os.WriteFile(stamp+".go", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, led := w.awaitLeader(t, "k", 5*time.Second, "second leads", func(in *lease.Info) bool { return in != nil && in.Holder == "second" })
	b2, _ := os.ReadFile(stamp)
	ns, _ := strconv.ParseInt(strings.TrimSpace(string(b2)), 10, 64)
	if d := led.Sub(time.Unix(0, ns)); d > 500*time.Millisecond {
		t.Errorf("second led %s after the leader's command ended", d)
	} else {
		t.Logf("handover %s after the command ended (polled every 5ms)", d)
	}
	if code := exitCode(first.Wait()); code != 0 {
		t.Errorf("the old leader exited %d, want its command's 0", code)
	}
}

func TestLeader_TransferAndResignWithNoMomentWithoutALeader(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	a.lead(t, "first", "k", []string{"--ttl", "5s"}, nil, "sleep", "300")
	w.awaitLeader(t, "k", 10*time.Second, "first leads", func(in *lease.Info) bool { return in != nil && in.Holder == "first" })
	b.lead(t, "second", "k", []string{"--ttl", "5s"}, nil, "sleep", "300")
	waitFor(t, 10*time.Second, "second is a candidate", func() bool { return w.candidates(t, "k") == 2 })

	obs := a.command("leader", "k", "--watch", "--json")
	out, _ := obs.StdoutPipe()
	if err := obs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Process.Kill(); obs.Wait() })
	events := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			events <- jsonOf(t, sc.Text())
		}
	}()
	next := func() map[string]any {
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no leadership event")
			return nil
		}
	}
	holder := func(ev map[string]any) string {
		if ev["event"] != "leader" {
			return "none"
		}
		return ev["leader"].(map[string]any)["holder"].(string)
	}
	if h := holder(next()); h != "first" {
		t.Fatalf("first event: %s", h)
	}
	r := a.must("leader", "transfer", "k", "--to", "second")
	if !strings.Contains(r.stdout, "second now leads k") {
		t.Errorf("transfer said %q", r.stdout)
	}
	if h := holder(next()); h != "second" {
		t.Fatalf("after the transfer: %s, want second with no leaderless moment", h)
	}
	a.must("leader", "resign", "k")
	if h := holder(next()); h != "first" {
		t.Fatalf("after the resignation: %s, want first with no leaderless moment", h)
	}
	a.expect(5, []string{"leader", "transfer", "k", "--to", "nobody"}, "not campaigning")
	a.expect(2, []string{"leader", "transfer", "k"}, "--to")
}

func TestLead_PreferredLeaderTakesOverAfterTheMinimumTerm(t *testing.T) {
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	a.lead(t, "low", "k", []string{"--score", "1", "--min-term", "1s"}, nil, "sleep", "300")
	low, _ := w.awaitLeader(t, "k", 10*time.Second, "low leads", func(in *lease.Info) bool { return in != nil && in.Holder == "low" })
	b.lead(t, "high", "k", []string{"--score", "9"}, nil, "sleep", "300")
	high, _ := w.awaitLeader(t, "k", 10*time.Second, "high leads", func(in *lease.Info) bool { return in != nil && in.Holder == "high" })
	// Both times are written by baton on this machine's clock.
	if term := high.AcquiredAt.Sub(low.AcquiredAt); term < time.Second {
		t.Errorf("the better candidate took over after %s, before the 1s minimum term", term)
	}
}

func TestLease_AcquireRenewReleaseGet(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	doc := jsonOf(t, h.must("lease", "acquire", "deploy", "--ttl", "30s", "--json").stdout)
	id := doc["holder"].(string)
	if id == "" || num(t, doc, "fence") < 1 || doc["ttl"] != "30s" {
		t.Fatalf("acquire --json: %v", doc)
	}
	h.expect(3, []string{"lease", "acquire", "deploy", "--instance", "someone-else"}, "held by instance "+id)
	h.expect(3, []string{"lease", "renew", "deploy", "--instance", "someone-else"}, "held by instance "+id)
	h.expect(2, []string{"lease", "renew", "deploy"}, "--instance")
	renewed := jsonOf(t, h.must("lease", "renew", "deploy", "--instance", id, "--json").stdout)
	if num(t, renewed, "renewals") != 1 || num(t, renewed, "fence") != num(t, doc, "fence") {
		t.Errorf("renew: %v", renewed)
	}
	if got := jsonOf(t, h.must("lease", "get", "deploy", "--json").stdout); got["holder"] != id {
		t.Errorf("get: %v", got)
	}
	rows := jsonOf(t, h.must("status", "--json").stdout)["leases"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["key"] != "deploy" || rows[0].(map[string]any)["state"] != "live" {
		t.Errorf("status leases: %v", rows)
	}
	h.must("lease", "release", "deploy", "--instance", id)
	if r := h.must("lease", "release", "deploy", "--instance", id); !strings.Contains(r.stdout, "nothing to release") {
		t.Errorf("second release: %s", r)
	}
	h.expect(5, []string{"lease", "get", "deploy"}, "no such lease")
	// --wait: woken when the holder releases.
	h.must("lease", "acquire", "busy", "--instance", "holder-1")
	waiting := h.command("lease", "acquire", "busy", "--wait", "10s", "--instance", "holder-2")
	var out strings.Builder
	waiting.Stdout = &out
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	h.must("lease", "release", "busy", "--instance", "holder-1")
	if err := waiting.Wait(); err != nil || !strings.Contains(out.String(), "acquired busy") {
		t.Errorf("waiting acquire: %v, %q", err, out.String())
	}
}

func TestDoctor_ALeaderThatIsNoCandidate(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	h.must("lease", "acquire", "leader.orphan-bot", "--ttl", "60s", "--instance", "ghost")
	found, _, code := h.findings()
	if code != 7 || len(found["leader_without_candidate"]) != 1 {
		t.Errorf("doctor: exit %d, %v; want leader_without_candidate", code, found)
	}
	if r := h.must("status"); !strings.Contains(r.stdout, "orphan-bot") || !strings.Contains(r.stdout, "ghost") {
		t.Errorf("status does not show the leader:\n%s", r.stdout)
	}
}

func TestLease_AWaiterOnTheSameHostLeavesALiveHoldersLeaseAlone(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	h.must("lease", "acquire", "shared", "--ttl", "30s", "--instance", "first")
	// The holder is the process that called baton (this test), alive: a
	// same-host waiter must not take the lease from it.
	h.expect(3, []string{"lease", "acquire", "shared", "--instance", "second", "--wait", "500ms"}, "held by instance first")
}

func TestLead_CampaignsAgainAfterTheServerComesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts the server")
	}
	store := t.TempDir()
	s1, err := kvserver.Start(kvserver.WithListen("127.0.0.1:-1"), kvserver.WithStoreDir(store))
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Shutdown()
	c := kvtest.Connect(t, s1.ClientURL())
	for _, cfg := range []kv.BucketConfig{session.BucketConfig(session.DefaultPrefix, 1), lease.BucketConfig(lease.DefaultPrefix, 1)} {
		if _, err := c.Ensure(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	w := &world{t: t, srv: s1, url: s1.ClientURL(), client: c}
	h := w.host("host-a")
	lead := h.lead(t, "only", "k", []string{"--ttl", "2s"}, nil, "sleep", "300")
	w.awaitLeader(t, "k", 10*time.Second, "only leads", func(in *lease.Info) bool { return in != nil && in.Holder == "only" })
	stderr := lead.Stderr.(*syncBuffer)
	defer func() { t.Logf("lead's stderr:\n%s", stderr.String()) }()
	c.Close()
	s1.Shutdown()
	// Past its local deadline the leader gives up and stops its command.
	waitFor(t, 10*time.Second, "the leader gives up", func() bool { return strings.Contains(stderr.String(), "not renewed in time") })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(w.url, "nats://"))
	s2, err := kvserver.Start(kvserver.WithListen("127.0.0.1:"+port), kvserver.WithStoreDir(store))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Shutdown()
	w.client = kvtest.Connect(t, s2.ClientURL())
	waitFor(t, 20*time.Second, "it leads again", func() bool { return strings.Count(stderr.String(), "leading k as only") == 2 })
	w.awaitLeader(t, "k", 10*time.Second, "the server says so", func(in *lease.Info) bool { return in != nil && in.Holder == "only" })
	if lead.ProcessState != nil {
		t.Fatal("baton lead exited instead of campaigning again")
	}
	if !strings.Contains(stderr.String(), "campaign again") {
		t.Errorf("stderr does not say it lost leadership and campaigns again")
	}
}

func TestStatusWatch_ShowsLeasesComeAndGo(t *testing.T) {
	w := newWorld(t)
	h := w.host("host-a")
	watch := h.watch(t)
	h.must("lease", "acquire", "deploy", "--instance", "ops-1")
	ev := watch.await(t, "lease_acquire", "", 5*time.Second)
	if ev["key"] != "deploy" || ev["lease"].(map[string]any)["holder"] != "ops-1" {
		t.Errorf("acquire event %v", ev)
	}
	h.must("lease", "release", "deploy", "--instance", "ops-1")
	if ev := watch.await(t, "lease_release", "", 5*time.Second); ev["key"] != "deploy" {
		t.Errorf("release event %v", ev)
	}
}

// A follower paused past its TTL loses its candidacy; resumed, it stands
// again and keeps following (it does not exit), and leads when the leader
// goes.
func TestLead_AFollowerPausedPastItsTTLStandsAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a TTL")
	}
	w := newWorld(t)
	a, b := w.host("host-a"), w.host("host-b")
	first := a.lead(t, "first", "k", []string{"--ttl", "1s"}, nil, "sleep", "300")
	w.awaitLeader(t, "k", 10*time.Second, "first leads", func(in *lease.Info) bool { return in != nil && in.Holder == "first" })
	second := b.lead(t, "second", "k", []string{"--ttl", "1s"}, nil, "sleep", "300")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the follower's stderr:\n%s", second.Stderr.(*syncBuffer).String())
		}
	})
	waitFor(t, 10*time.Second, "second is a candidate", func() bool { return w.candidates(t, "k") == 2 })

	second.Process.Signal(syscall.SIGSTOP)
	waitFor(t, 10*time.Second, "the paused follower's candidacy expires", func() bool { return w.candidates(t, "k") == 1 })
	second.Process.Signal(syscall.SIGCONT)
	waitFor(t, 10*time.Second, "the resumed follower stands again", func() bool { return w.candidates(t, "k") == 2 })

	first.Process.Signal(syscall.SIGTERM)
	w.awaitLeader(t, "k", 10*time.Second, "second leads once first goes", func(in *lease.Info) bool { return in != nil && in.Holder == "second" })
}

// An instance id with a dot may not campaign (adr/0024): exit 2 naming the
// rule, before anything is written.
func TestLead_AnInstanceIDWithADotIsRefused(t *testing.T) {
	w := newWorld(t)
	h := w.host("h1")
	h.env = append(h.env, "BATON_INSTANCE=bot.1")
	h.expect(2, []string{"lead", "chat", "--", "true"}, `"bot.1"`, "may not contain '.'")
	if in := w.leader(t, "chat"); in != nil {
		t.Errorf("a leader after the refusal: %+v", in)
	}
}
