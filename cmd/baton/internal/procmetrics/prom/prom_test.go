package prom

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/procmetrics"
	"github.com/batonhq/baton/queue"
)

func TestRenewHook_CountsLatencyAndFailuresByKind(t *testing.T) {
	m := New("lead", "i-1")
	hook := m.RenewHook(func(key string) string {
		if key == "leader.k" {
			return procmetrics.KindLeader
		}
		return procmetrics.KindCandidacy
	}, procmetrics.KindLeader, procmetrics.KindCandidacy)
	if v := testutil.ToFloat64(m.renewFails.WithLabelValues(procmetrics.KindCandidacy)); v != 0 || testutil.CollectAndCount(m.renewFails) != 2 {
		t.Errorf("before any renewal: %d failure series, candidacy at %v; want both kinds at 0", testutil.CollectAndCount(m.renewFails), v)
	}
	hook("leader.k", 3*time.Millisecond, nil)
	hook("leader.k", 4*time.Millisecond, nil)
	hook("leader.k", time.Second, errors.New("timeout"))
	hook("candidate.k.i-1", time.Millisecond, nil)
	if n := testutil.CollectAndCount(m.renewals); n != 2 {
		t.Errorf("%d renewal series, want one per kind (2)", n)
	}
	if v := testutil.ToFloat64(m.renewFails.WithLabelValues(procmetrics.KindLeader)); v != 1 {
		t.Errorf("leader renewal failures %v, want 1", v)
	}
	want := `
# HELP baton_renewal_failures_total Renewals that failed (the server away or slow, or the key lost), by what was renewed.
# TYPE baton_renewal_failures_total counter
baton_renewal_failures_total{kind="candidacy"} 0
baton_renewal_failures_total{kind="leader"} 1
`
	if err := testutil.CollectAndCompare(m.renewFails, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestLeadership_GainedLostAndIsLeader(t *testing.T) {
	m := New("lead", "i-1")
	m.Watch("k")
	if v := testutil.ToFloat64(m.isLeader.WithLabelValues("k")); v != 0 {
		t.Errorf("is_leader before a term: %v", v)
	}
	m.Gained("k")
	if v := testutil.ToFloat64(m.isLeader.WithLabelValues("k")); v != 1 {
		t.Errorf("is_leader in a term: %v", v)
	}
	m.Lost("k", procmetrics.LostHandover)
	m.Gained("k")
	m.Lost("k", procmetrics.LostExpired)
	if g, h, e, l := testutil.ToFloat64(m.gained.WithLabelValues("k")), testutil.ToFloat64(m.lost.WithLabelValues("k", procmetrics.LostHandover)),
		testutil.ToFloat64(m.lost.WithLabelValues("k", procmetrics.LostExpired)), testutil.ToFloat64(m.isLeader.WithLabelValues("k")); g != 2 || h != 1 || e != 1 || l != 0 {
		t.Errorf("gained %v, lost by handover %v, by expiry %v, is_leader %v; want 2, 1, 1, 0", g, h, e, l)
	}
}

func TestTaskEvent_OutcomesRunningAndDuration(t *testing.T) {
	m := New("queue work", "i-1")
	m.Serving("q")
	code := func(c int) *int { return &c }
	for _, ev := range []queue.Event{
		{Kind: queue.EventStarted, Slot: "a", Fence: 1}, {Kind: queue.EventStarted, Slot: "b", Fence: 2}, {Kind: queue.EventStarted, Slot: "c", Fence: 3},
		{Kind: queue.EventEnded, Slot: "a", Fence: 1, Reason: queue.ReasonExit, ExitCode: code(0), Took: time.Second},
		{Kind: queue.EventEnded, Slot: "b", Fence: 2, Reason: queue.ReasonExit, ExitCode: code(2), Took: time.Second},
		{Kind: queue.EventError, Err: errors.New("retried")},
		// A claim given back while draining: ended, never started.
		{Kind: queue.EventEnded, Slot: "d", Fence: 4, Reason: queue.ReasonDrained},
	} {
		m.TaskEvent("q", ev)
	}
	if v := testutil.ToFloat64(m.running.WithLabelValues("q")); v != 1 {
		t.Errorf("running %v, want 1 (3 started, 2 of them ended, 1 ended unstarted)", v)
	}
	m.TaskEvent("q", queue.Event{Kind: queue.EventEnded, Slot: "c", Fence: 3, Reason: queue.ReasonTimeout, Took: time.Hour})
	if v := testutil.ToFloat64(m.running.WithLabelValues("q")); v != 0 {
		t.Errorf("running %v after every started task ended, want 0", v)
	}
	if n := histCount(t, m, "q"); n != 3 {
		t.Errorf("%d task durations observed, want 3 (the unstarted one took none)", n)
	}
	for outcome, want := range map[string]float64{"success": 1, "failure": 1, "timeout": 1, "drained": 1} {
		if v := testutil.ToFloat64(m.tasks.WithLabelValues("q", outcome)); v != want {
			t.Errorf("outcome %s: %v, want %v", outcome, v, want)
		}
	}
	if procmetrics.Outcome(queue.Event{Reason: queue.ReasonExit}) != "failure" {
		t.Error("an exit without a code is not a success")
	}
}

// Start serves the metrics, hooks renewals and records.
func TestStart_ServesAndHooksRenewals(t *testing.T) {
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{ErrOut: io.Discard}, Getenv: func(string) string { return "" }}
	pm, stop, err := Start(t.Context(), f, "run", "127.0.0.1:0", procmetrics.Kind(procmetrics.KindSession), procmetrics.KindSession)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if f.RenewHook == nil {
		t.Fatal("Start did not set the renewal hook")
	}
	f.RenewHook("slot", time.Millisecond, nil)
	if n := testutil.CollectAndCount(pm.(*Metrics).renewals); n != 1 {
		t.Errorf("%d renewal series after one renewal, want 1", n)
	}
}

func TestServe_ScrapesAndRefusesATakenAddress(t *testing.T) {
	m := New("run", "i-1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, stop, err := m.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `baton_process_info{instance="i-1",verb="run",version=`) {
		t.Errorf("GET /metrics: %d\n%s", resp.StatusCode, body)
	}
	if resp, err := http.Post("http://"+addr.String()+"/metrics", "text/plain", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %v, %v", resp, err)
	}

	_, _, err = New("run", "i-2").Serve(ctx, addr.String())
	if cmdutil.Code(err) != cmdutil.ExitConflict || !strings.Contains(err.Error(), addr.String()) {
		t.Errorf("serving on a taken address: exit %d, %v; want exit 3 naming it", cmdutil.Code(err), err)
	}
	stop()
	if _, err := net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
		t.Error("still listening after stop")
	}
}

// histCount is the number of task durations observed for q.
func histCount(t *testing.T, m *Metrics, q string) uint64 {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "baton_task_duration_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() == q {
					return s.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}
