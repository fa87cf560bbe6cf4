// Package prom is the Prometheus metrics of one baton process that holds
// something: `baton lead`, `baton run` and `baton queue work` serve them on
// --metrics ADDR (path /metrics), with client_golang. Only the full program
// links it (ADR 0030): the client program hands a command line with
// --metrics to it; package procmetrics is the part both share.
//
// What they measure and how their labels are bounded: package
// procmetrics.
package prom

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/procmetrics"
	"github.com/batonhq/baton/queue"
)

// Metrics are one process's metrics (a cmdutil.ProcessMetrics).
type Metrics struct {
	reg *prometheus.Registry

	renewals     *prometheus.HistogramVec
	renewFails   *prometheus.CounterVec
	gained       *prometheus.CounterVec
	lost         *prometheus.CounterVec
	isLeader     *prometheus.GaugeVec
	tasks        *prometheus.CounterVec
	running      *prometheus.GaugeVec
	taskDuration *prometheus.HistogramVec

	mu      sync.Mutex
	started map[runKey]bool // attempts started and not yet ended
}

// runKey names one attempt: its key lock's slot and fence.
type runKey struct {
	slot  string
	fence uint64
}

// New returns the metrics of a process running verb, as instance.
func New(verb, instance string) *Metrics {
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		started: map[runKey]bool{},
		renewals: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_renewal_duration_seconds",
			Help:    "Round trip of each renewal that succeeded, by what was renewed (session, leader, candidacy, task).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"kind"}),
		renewFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_renewal_failures_total",
			Help: "Renewals that failed (the server away or slow, or the key lost), by what was renewed.",
		}, []string{"kind"}),
		gained: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_leadership_gained_total",
			Help: "Terms this process began as the agent key's leader.",
		}, []string{"agent_key"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_leadership_lost_total",
			Help: "Terms this process ended, by reason: lost (not renewed in time, taken), handover (to another candidate), exit (the command ended).",
		}, []string{"agent_key", "reason"}),
		isLeader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baton_is_leader",
			Help: "1 while this process leads the agent key and runs its command, else 0.",
		}, []string{"agent_key"}),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_tasks_total",
			Help: "Task attempts this worker ended, by outcome: success, failure (non-zero exit), timeout, lost, cancelled, drained, released, start_failed.",
		}, []string{"queue", "outcome"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baton_tasks_running",
			Help: "Tasks this worker runs now.",
		}, []string{"queue"}),
		taskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_task_duration_seconds",
			Help:    "How long each task attempt this worker ended ran.",
			Buckets: []float64{.1, .5, 1, 5, 15, 60, 300, 900, 1800, 3600, 7200},
		}, []string{"queue"}),
	}
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "baton_process_info",
		Help: "This baton process: 1 with its verb, version and instance.",
	}, []string{"verb", "version", "instance"})
	info.WithLabelValues(verb, cmdutil.Version(), instance).Set(1)
	m.reg.MustRegister(info, m.renewals, m.renewFails, m.gained, m.lost, m.isLeader, m.tasks, m.running, m.taskDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// RenewHook returns the hook that counts renewals (session.WithRenewHook,
// lease.WithRenewHook, queue.WithRenewHook), labelled by kind(key). The
// series of kinds are present from the start (at 0), so that a rate or an
// alert on failures has a series before the first one.
func (m *Metrics) RenewHook(kind func(key string) string, kinds ...string) func(key string, took time.Duration, err error) {
	for _, k := range kinds {
		m.renewals.WithLabelValues(k)
		m.renewFails.WithLabelValues(k)
	}
	return func(key string, took time.Duration, err error) {
		k := kind(key)
		if err != nil {
			m.renewFails.WithLabelValues(k).Inc()
			return
		}
		m.renewals.WithLabelValues(k).Observe(took.Seconds())
	}
}

// Start serves a process's metrics on addr (not empty) and sets f.RenewHook
// to count the renewals of the sessions, leases and queues f makes next,
// labelled by kind(key), one of kinds. When addr's port is 0, it says on
// stderr which port it picked. It is the full program's
// cmdutil.MetricsServer; verbs call it through Start.
func Start(ctx context.Context, f *cmdutil.Factory, verb, addr string, kind func(key string) string, kinds ...string) (cmdutil.ProcessMetrics, func(), error) {
	m := New(verb, f.Instance())
	bound, stop, err := m.Serve(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	f.RenewHook = m.RenewHook(kind, kinds...)
	if _, port, _ := net.SplitHostPort(addr); port == "0" {
		cmdutil.Fprintf(f.IO.ErrOut, "baton: %s: metrics at http://%s/metrics\n", verb, bound)
	}
	return m, stop, nil
}

// Watch makes agent key's series present (at 0) before the first term.
func (m *Metrics) Watch(agentKey string) {
	m.gained.WithLabelValues(agentKey)
	for _, r := range []string{procmetrics.LostExpired, procmetrics.LostHandover, procmetrics.LostExit} {
		m.lost.WithLabelValues(agentKey, r)
	}
	m.isLeader.WithLabelValues(agentKey).Set(0)
}

// Gained records a term begun.
func (m *Metrics) Gained(agentKey string) {
	m.gained.WithLabelValues(agentKey).Inc()
	m.isLeader.WithLabelValues(agentKey).Set(1)
}

// Lost records a term ended, for reason (procmetrics.LostExpired,
// LostHandover, LostExit).
func (m *Metrics) Lost(agentKey, reason string) {
	m.lost.WithLabelValues(agentKey, reason).Inc()
	m.isLeader.WithLabelValues(agentKey).Set(0)
}

// Serving makes queue q's series present (at 0) before the first task.
func (m *Metrics) Serving(q string) {
	m.running.WithLabelValues(q).Set(0)
}

// TaskEvent counts a worker's event (queue.WithEvents). An attempt that
// ended without having started (a claim given back while draining) is
// counted by its outcome only: it neither ran nor took any time.
func (m *Metrics) TaskEvent(q string, ev queue.Event) {
	k := runKey{ev.Slot, ev.Fence}
	switch ev.Kind {
	case queue.EventStarted:
		m.mu.Lock()
		m.started[k] = true
		m.mu.Unlock()
		m.running.WithLabelValues(q).Inc()
	case queue.EventEnded:
		m.mu.Lock()
		ran := m.started[k]
		delete(m.started, k)
		m.mu.Unlock()
		m.tasks.WithLabelValues(q, procmetrics.Outcome(ev)).Inc()
		if ran {
			m.running.WithLabelValues(q).Dec()
			m.taskDuration.WithLabelValues(q).Observe(ev.Took.Seconds())
		}
	}
}

// Serve listens on addr and serves the metrics at /metrics until ctx is
// done or stop is called. It returns the address it listens on. A listen
// that fails is exit 3, naming the address.
func (m *Metrics) Serve(ctx context.Context, addr string) (bound net.Addr, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, cmdutil.Exit(cmdutil.ExitConflict, fmt.Errorf("--metrics: cannot listen on %s: %w; pick another address", addr, err))
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = hs.Serve(ln) }) // ErrServerClosed once closed; nothing else stops it
	wg.Go(func() {
		<-ctx.Done()
		_ = hs.Close()
	})
	return ln.Addr(), func() { cancel(); wg.Wait() }, nil
}
