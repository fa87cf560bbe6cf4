package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/batonhq/baton/lease"
)

// sample is one series of a scrape: its labels and value (a histogram's
// value is its count).
type sample struct {
	labels map[string]string
	value  float64
}

// scrapeAt reads a /metrics page with Prometheus' own parser; a page that
// does not answer is an empty scrape.
func scrapeAt(t *testing.T, url string) map[string][]sample {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s does not parse: %v", url, err)
	}
	out := map[string][]sample{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.value = m.Counter.GetValue()
			case m.Gauge != nil:
				s.value = m.Gauge.GetValue()
			case m.Histogram != nil:
				s.value = float64(m.Histogram.GetSampleCount())
			}
			out[name] = append(out[name], s)
		}
	}
	return out
}

// value is the value of the series of name with every label of want, or
// -1 when there is none.
func value(scrape map[string][]sample, name string, want ...string) float64 {
	for _, s := range scrape[name] {
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			ok = ok && s.labels[want[i]] == want[i+1]
		}
		if ok {
			return s.value
		}
	}
	return -1
}

var metricsAddrRE = regexp.MustCompile(`metrics at (http://\S+/metrics)`)

// metricsURL waits for a process started with --metrics 127.0.0.1:0 to say
// where it serves them.
func metricsURL(t *testing.T, stderr *syncBuffer) string {
	t.Helper()
	var url string
	waitFor(t, 10*time.Second, "the metrics address on stderr", func() bool {
		if m := metricsAddrRE.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	return url
}

// awaitMetrics scrapes url until cond holds of the scrape.
func awaitMetrics(t *testing.T, url, what string, cond func(map[string][]sample) bool) map[string][]sample {
	t.Helper()
	var last map[string][]sample
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if last = scrapeAt(t, url); cond(last) {
			return last
		}
		time.Sleep(50 * time.Millisecond)
	}
	var lines []string
	for name, ss := range last {
		if strings.HasPrefix(name, "baton_") {
			for _, s := range ss {
				lines = append(lines, fmt.Sprintf("%s%v = %g", name, s.labels, s.value))
			}
		}
	}
	sort.Strings(lines)
	t.Fatalf("%s: not within 10s; last scrape of %s:\n%s", what, url, strings.Join(lines, "\n"))
	return nil
}

func TestMetrics_LeadExportsLeadershipAndRenewals(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for renewals")
	}
	w := newWorld(t)
	h := w.host("h1")
	first := h.lead(t, "first", "mk", []string{"--ttl", "3s", "--metrics", "127.0.0.1:0"}, nil, "sleep", "300")
	w.awaitLeader(t, "mk", 10*time.Second, "first leads", func(in *lease.Info) bool { return in != nil && in.Holder == "first" && in.ChildPID != 0 })
	second := h.lead(t, "second", "mk", []string{"--ttl", "3s", "--metrics", "127.0.0.1:0"}, nil, "sleep", "300")
	firstURL, secondURL := metricsURL(t, first.Stderr.(*syncBuffer)), metricsURL(t, second.Stderr.(*syncBuffer))

	awaitMetrics(t, firstURL, "the leader's metrics say it leads and renews", func(s map[string][]sample) bool {
		return value(s, "baton_is_leader", "agent_key", "mk") == 1 &&
			value(s, "baton_leadership_gained_total", "agent_key", "mk") == 1 &&
			value(s, "baton_renewal_duration_seconds", "kind", "leader") >= 2 &&
			value(s, "baton_renewal_duration_seconds", "kind", "candidacy") >= 1 &&
			value(s, "baton_process_info", "verb", "lead", "instance", "first") == 1
	})
	awaitMetrics(t, secondURL, "the follower's metrics say it does not lead", func(s map[string][]sample) bool {
		return value(s, "baton_is_leader", "agent_key", "mk") == 0 &&
			value(s, "baton_leadership_gained_total", "agent_key", "mk") == 0 &&
			value(s, "baton_renewal_duration_seconds", "kind", "candidacy") >= 1
	})

	h.must("leader", "transfer", "mk", "--to", "second", "--wait", "10s")
	awaitMetrics(t, firstURL, "the former leader's metrics count a handover", func(s map[string][]sample) bool {
		return value(s, "baton_is_leader", "agent_key", "mk") == 0 &&
			value(s, "baton_leadership_lost_total", "agent_key", "mk", "reason", "handover") == 1
	})
	awaitMetrics(t, secondURL, "the new leader's metrics say it leads", func(s map[string][]sample) bool {
		return value(s, "baton_is_leader", "agent_key", "mk") == 1 &&
			value(s, "baton_leadership_gained_total", "agent_key", "mk") == 1
	})
}

func TestMetrics_RunAndQueueWorkExportRenewalsAndOutcomes(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for renewals")
	}
	w := newWorld(t)
	h := w.host("h1")

	// run: the session's renewals, while the command runs.
	release := filepath.Join(t.TempDir(), "release")
	run := h.command("run", "slot-m", "--task", "T", "--ttl", "1s", "--metrics", "127.0.0.1:0", "--",
		"sh", "-c", "while [ ! -e "+release+" ]; do sleep 0.05; done")
	runErr := &syncBuffer{}
	run.Stderr = runErr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Process.Kill(); run.Wait() })
	url := metricsURL(t, runErr)
	awaitMetrics(t, url, "run's metrics count its session's renewals", func(s map[string][]sample) bool {
		return value(s, "baton_renewal_duration_seconds", "kind", "session") >= 2 &&
			value(s, "baton_renewal_failures_total", "kind", "session") <= 0 &&
			value(s, "baton_process_info", "verb", "run") == 1
	})
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("run: %v; stderr %s", err, runErr)
	}
	if strings.Count(runErr.String(), "\n") != 1 {
		t.Errorf("run printed more than where its metrics are: %q", runErr)
	}

	// queue work: task outcomes, running tasks, the key locks' renewals.
	h.must("queue", "create", "mq", "--ttl", "1s", "--max-attempts", "1")
	h.must("queue", "add", "mq", "--key", "a", "--id", "ok", "--payload", "0")
	h.must("queue", "add", "mq", "--key", "b", "--id", "bad", "--payload", "1")
	wk := h.startWorker(t, "mq", "--concurrency", "2", "--metrics", "127.0.0.1:0", "--", "sh", "-c", "sleep 0.8; exit $(cat)")
	url = metricsURL(t, wk.errs)
	awaitMetrics(t, url, "the worker's metrics count one success and one failure", func(s map[string][]sample) bool {
		return value(s, "baton_tasks_total", "queue", "mq", "outcome", "success") == 1 &&
			value(s, "baton_tasks_total", "queue", "mq", "outcome", "failure") == 1 &&
			value(s, "baton_task_duration_seconds", "queue", "mq") == 2 &&
			value(s, "baton_tasks_running", "queue", "mq") == 0 &&
			value(s, "baton_renewal_duration_seconds", "kind", "task") >= 2 &&
			value(s, "baton_process_info", "verb", "queue work") == 1
	})
}

// A queue worker runs its Go code on one thread (ADR 0037), unless
// GOMAXPROCS says otherwise.
func TestMetrics_QueueWorkRunsOnOneThreadUnlessGOMAXPROCSIsSet(t *testing.T) {
	w := newWorld(t)
	h := w.host("h1")
	h.must("queue", "create", "mt")
	for _, c := range []struct {
		env  []string
		want float64
	}{{nil, 1}, {[]string{"GOMAXPROCS=3"}, 3}} {
		h.env = c.env
		wk := h.startWorker(t, "mt", "--metrics", "127.0.0.1:0", "--", "true")
		url := metricsURL(t, wk.errs)
		s := awaitMetrics(t, url, "the worker's Go runtime metrics", func(s map[string][]sample) bool {
			return len(s["go_sched_gomaxprocs_threads"]) > 0
		})
		if got := value(s, "go_sched_gomaxprocs_threads"); got != c.want {
			t.Errorf("queue work with %v: GOMAXPROCS %v, want %v", c.env, got, c.want)
		}
		wk.kill()
	}
}
