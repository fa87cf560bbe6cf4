package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

// dashboardRows measures `baton ui` as an operator meets it: beside the
// 100k sessions of the scale section (prefix st), the first page of
// sessions (beside the library listing `baton status` makes of the same
// bucket), the time to load them all (beside a raw WatchAll) and the
// dashboard's memory (beside `baton status --json`'s peak); and, on a
// bucket of its own where 1k sessions renew every second, how long a KV
// change takes to reach an EventSource client (beside a raw KV watch of
// the same write).
func (b *bench) dashboardRows(ctx context.Context) ([]row, error) {
	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName("bench-dashboard"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	full, err := b.prefixManager(ctx, c, "st")
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(c.Conn())
	if err != nil {
		return nil, err
	}
	fullKV, err := js.KeyValue(ctx, session.BucketConfig("st", 1).Name)
	if err != nil {
		return nil, err
	}
	// The scale section left 100k sessions (and its joins); alone (-only
	// dashboard), store them here.
	if st, err := fullKV.Status(ctx); err != nil {
		return nil, err
	} else if st.Values() < uint64(b.scaleMax) {
		b.progress("  storing %s sessions", kilo(b.scaleMax))
		if err := storeSessions(ctx, c.Conn(), session.BucketConfig("st", 1).Name, 0, b.scaleMax); err != nil {
			return nil, err
		}
	}

	b.progress("  baton ui beside %s sessions", kilo(b.scaleMax))
	t0 := time.Now()
	ui, err := b.startUI(ctx, "st")
	if err != nil {
		return nil, err
	}
	defer ui.stop()
	ready := time.Since(t0)
	var watchAll samples
	for range 2 {
		d, err := timeIt(func() error { _, err := watchAllCount(ctx, fullKV); return err })
		if err != nil {
			return nil, err
		}
		watchAll = append(watchAll, d)
	}

	reps := b.pageReps
	var page, list samples
	for i := range reps {
		for _, side := range order(i, 2) {
			switch side {
			case 0:
				d, err := timeIt(func() error { return ui.firstPage(ctx, b.scaleMax) })
				if err != nil {
					return nil, err
				}
				page = append(page, d)
			case 1:
				d, err := timeIt(func() error { _, err := full.List(ctx); return err })
				if err != nil {
					return nil, err
				}
				list = append(list, d)
			}
		}
	}
	uiPeak, err := peakRSS(ui.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	st, err := runProc(ctx, b.cliEnv("st"), nil, b.peakrss, b.baton, "status", "--json")
	if err != nil {
		return nil, err
	}
	statusKiB, err := parsePeak(st.stderr)
	if err != nil {
		return nil, err
	}
	ui.stop()

	b.progress("  events: a KV change to an EventSource client, 1k sessions renewing every second")
	ev, err := b.eventLatency(ctx, c, js)
	if err != nil {
		return nil, err
	}

	return []row{
		{metric: "ui_sessions_page_" + kilo(b.scaleMax) + " median (floor: status's listing of them)", unit: unitDuration,
			baton: dur(page.median()), floor: dur(list.median()), etcd: missing("n/a"),
			// A page comes from the dashboard's model: well under a listing.
			goal: []cond{toFloorAtMost(0.5)}},
		{metric: "ui_sessions_page_" + kilo(b.scaleMax) + " " + tail(reps), unit: unitDuration,
			baton: dur(page.p99()), floor: dur(list.p99()), etcd: missing("n/a")},
		{metric: "ui_ready_" + kilo(b.scaleMax) + " (start to /readyz; floor: a raw WatchAll)", unit: unitDuration,
			baton: dur(ready), floor: dur(watchAll.median()), etcd: missing("n/a")},
		{metric: "rss_ui_" + kilo(b.scaleMax) + " (peak; floor: baton status --json of the same)", unit: unitBytes,
			baton: val(float64(uiPeak)), floor: val(float64(statusKiB << 10)), etcd: missing("n/a"),
			goal: []cond{batonAtMost(300<<20, unitBytes)}},
		{metric: "ui_event median (KV write to EventSource, 1k renewing/s; floor: a raw KV watch)", unit: unitDuration,
			baton: dur(ev.sse.median()), floor: dur(ev.watch.median()), etcd: missing("n/a")},
		{metric: "ui_event " + tail(len(ev.sse)), unit: unitDuration,
			baton: dur(ev.sse.p99()), floor: dur(ev.watch.p99()), etcd: missing("n/a"),
			// The raw watch, plus at most the page's 50 ms batch of events.
			goal: []cond{toFloorAtMostPlus(1, float64(50*time.Millisecond))}},
	}, nil
}

// sessionManager is a session manager of prefix, as host PREFIX-host, its
// bucket present.
func (b *bench) sessionManager(ctx context.Context, c *kv.Client, prefix string) (*session.Manager, error) {
	sd, err := hostlocal.OpenStateDir(mkdir(b.shm, prefix+"-state"))
	if err != nil {
		return nil, err
	}
	m, err := session.NewManager(c, session.WithHostID(prefix+"-host"), session.WithStateDir(sd), session.WithPrefix(prefix))
	if err != nil {
		return nil, err
	}
	return m, m.Ensure(ctx, 1)
}

// prefixManager is sessionManager with every bucket the dashboard reads
// present.
func (b *bench) prefixManager(ctx context.Context, c *kv.Client, prefix string) (*session.Manager, error) {
	m, err := b.sessionManager(ctx, c, prefix)
	if err != nil {
		return nil, err
	}
	ls, err := lease.New(c, lease.WithPrefix(prefix))
	if err != nil {
		return nil, err
	}
	if err := ls.Ensure(ctx, 1); err != nil {
		return nil, err
	}
	qs, err := queue.New(m)
	if err != nil {
		return nil, err
	}
	return m, qs.Ensure(ctx, 1)
}

// cliEnv is the environment of a baton process on prefix.
func (b *bench) cliEnv(prefix string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + b.work, "BATON_URL=" + b.nats.url,
		"BATON_PREFIX=" + prefix, "BATON_STATE_DIR=" + mkdir(b.shm, prefix+"-cli")}
	// The runtime's knobs pass through, for profiling a run.
	for _, k := range []string{"GODEBUG", "GOGC", "GOMEMLIMIT"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// uiProc is a running `baton ui`.
type uiProc struct {
	cmd  *exec.Cmd
	url  string
	once sync.Once
}

// startUI starts `baton ui` on prefix and waits until /readyz says ready.
func (b *bench) startUI(ctx context.Context, prefix string) (*uiProc, error) {
	cmd := exec.Command(b.baton, "ui", "--listen", "127.0.0.1:0", "--json")
	cmd.Env = b.cliEnv(prefix)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(b.work, "ui-"+prefix+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	u := &uiProc{cmd: cmd}
	var doc struct {
		URL string `json:"url"`
	}
	if err := json.NewDecoder(out).Decode(&doc); err != nil || doc.URL == "" {
		u.stop()
		return nil, fmt.Errorf("baton ui printed no address (%v); see %s", err, logf.Name())
	}
	u.url = doc.URL
	deadline := time.Now().Add(opTimeout)
	for {
		resp, err := http.Get(u.url + "readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return u, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			u.stop()
			return nil, fmt.Errorf("baton ui not ready within %s (%v)", opTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (u *uiProc) stop() {
	u.once.Do(func() {
		_ = u.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = u.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = u.cmd.Process.Kill()
			<-done
		}
	})
}

// firstPage fetches the first page of sessions, as the page does, and
// reads it whole.
func (u *uiProc) firstPage(ctx context.Context, atLeast int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url+"api/v1/sessions?limit=100", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var doc struct {
		Total int               `json:"total"`
		Rows  []json.RawMessage `json:"rows"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || len(doc.Rows) != 100 || doc.Total < atLeast {
		return fmt.Errorf("first page: %d, %d rows of %d", resp.StatusCode, len(doc.Rows), doc.Total)
	}
	return nil
}

// eventSamples are, per probe write, the time to a raw KV watch and to the
// dashboard's event stream.
type eventSamples struct{ watch, sse samples }

// eventRenewers is how many sessions renew every second during the event
// probes.
const eventRenewers = 1000

// eventLatency joins 1k sessions on a prefix of its own and renews each
// every second, starts a dashboard with one EventSource client, then joins
// probe slots one at a time: for each, the time from before the join's
// write to its arrival on a raw KV watch and on the event stream.
func (b *bench) eventLatency(ctx context.Context, c *kv.Client, js jetstream.JetStream) (eventSamples, error) {
	var res eventSamples
	m, err := b.prefixManager(ctx, c, "ev")
	if err != nil {
		return res, err
	}
	sessions := make([]*session.Session, eventRenewers)
	for i := range sessions {
		if sessions[i], err = m.Join(ctx, fmt.Sprintf("r%04d", i), "bench", session.WithTTL(30*time.Second)); err != nil {
			return res, err
		}
	}
	ui, err := b.startUI(ctx, "ev")
	if err != nil {
		return res, err
	}
	defer ui.stop()

	rctx, stopRenewing := context.WithCancel(ctx)
	renewErr := make(chan error, 8)
	var wg sync.WaitGroup
	const workers = 8
	for w := range workers {
		wg.Go(func() {
			mine := sessions[w*eventRenewers/workers : (w+1)*eventRenewers/workers]
			start := time.Now()
			for round := 0; ; round++ {
				for i, s := range mine {
					at := start.Add(time.Duration(round)*time.Second + time.Duration(i)*time.Second/time.Duration(len(mine)))
					select {
					case <-rctx.Done():
						return
					case <-time.After(time.Until(at)):
					}
					next, err := m.Commit(rctx, s, "")
					if err != nil {
						if rctx.Err() == nil {
							renewErr <- err
						}
						return
					}
					mine[i] = next
				}
			}
		})
	}
	defer func() { stopRenewing(); wg.Wait() }()

	// The raw floor: a watch of the bucket in this process (it sees the
	// renewals too, as the dashboard does).
	evKV, err := js.KeyValue(ctx, session.BucketConfig("ev", 1).Name)
	if err != nil {
		return res, err
	}
	watcher, err := evKV.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return res, err
	}
	defer func() { _ = watcher.Stop() }()
	sse, err := ui.events(ctx)
	if err != nil {
		return res, err
	}
	defer sse.Close()

	probes := b.dispatches
	run := time.Now().UnixNano()
	// Let the renewals run a full round first.
	time.Sleep(1200 * time.Millisecond)
	for i := range probes {
		select {
		case err := <-renewErr:
			return res, fmt.Errorf("renewing: %w", err)
		default:
		}
		slot := fmt.Sprintf("p%d-%d", run, i)
		t0 := time.Now()
		s, err := m.Join(ctx, slot, "probe", session.WithTTL(30*time.Second))
		if err != nil {
			return res, err
		}
		gotWatch, gotSSE := false, false
		deadline := time.After(5 * time.Second)
		for !gotWatch || !gotSSE {
			select {
			case e := <-watcher.Updates():
				if e != nil && e.Key() == slot && !gotWatch {
					gotWatch = true
					res.watch = append(res.watch, time.Since(t0))
				}
			case key, ok := <-sse.keys:
				if !ok {
					return res, fmt.Errorf("the event stream ended: %v", sse.err())
				}
				if key == slot && !gotSSE {
					gotSSE = true
					res.sse = append(res.sse, time.Since(t0))
				}
			case <-deadline:
				return res, fmt.Errorf("probe %s: on the watch %v, on the event stream %v after 5s", slot, gotWatch, gotSSE)
			}
		}
		_ = m.Close(ctx, s, session.ResultSuccess)
		time.Sleep(20 * time.Millisecond)
	}
	return res, nil
}

// sseStream is an EventSource client of the dashboard: the keys of the
// session changes it receives, in order.
type sseStream struct {
	body   io.ReadCloser
	keys   chan string
	closed chan struct{}
	once   sync.Once
	mu     sync.Mutex
	e      error
}

func (s *sseStream) Close() {
	s.once.Do(func() { close(s.closed) })
	_ = s.body.Close()
}

func (s *sseStream) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.e
}

// events opens /api/v1/events?kinds=session and reads it in the
// background until closed.
func (u *uiProc) events(ctx context.Context) (*sseStream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url+"api/v1/events?kinds=session", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("events: %s", resp.Status)
	}
	s := &sseStream{body: resp.Body, keys: make(chan string, 1<<16), closed: make(chan struct{})}
	go func() {
		defer close(s.keys)
		r := bufio.NewReaderSize(resp.Body, 1<<20)
		event := ""
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				if !errors.Is(err, io.EOF) {
					s.mu.Lock()
					s.e = err
					s.mu.Unlock()
				}
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case strings.HasPrefix(line, "event:"):
				event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "data:") && event == "changes":
				var doc struct {
					Changes []struct {
						Kind string `json:"kind"`
						Key  string `json:"key"`
						Op   string `json:"op"`
					} `json:"changes"`
				}
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data:")), &doc) == nil {
					for _, ch := range doc.Changes {
						if ch.Kind == "session" && ch.Op == "put" {
							// The probe loop reads every key; none is dropped
							// (a dropped probe would look like a lost event).
							select {
							case s.keys <- ch.Key:
							case <-s.closed:
								return
							}
						}
					}
				}
			case line == "":
				event = ""
			}
		}
	}()
	return s, nil
}
