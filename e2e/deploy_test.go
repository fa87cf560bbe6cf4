package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/limits"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

// deployDir is the repository's deploy/ directory.
func deployDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../deploy")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

var metricNameRE = regexp.MustCompile(`\bbaton_[a-z0-9_]+\b`)

// deployMetricNames are the baton_* names deploy/'s files use, each with
// the files that use it.
func deployMetricNames(t *testing.T) map[string][]string {
	t.Helper()
	names := map[string][]string{}
	root := deployDir(t)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ext := filepath.Ext(path)
		if ext != ".yml" && ext != ".yaml" && ext != ".json" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, n := range metricNameRE.FindAllString(string(b), -1) {
			if !slices.Contains(names[n], rel) {
				names[n] = append(names[n], rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// selector is one equality matcher of a metric in deploy/.
type selector struct{ name, label, value string }

var (
	selectorRE = regexp.MustCompile(`\b(baton_[a-z0-9_]+)\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-z_]+)="([^"]*)"`)
)

// deploySelectors are the name{label="value"} matchers deploy/'s files use
// (but on job, and values that are dashboard variables), with the files.
func deploySelectors(t *testing.T) map[selector][]string {
	t.Helper()
	out := map[selector][]string{}
	root := deployDir(t)
	for _, rel := range []string{"prometheus/baton-alerts.yml", "grafana/baton.json"} {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), `\"`, `"`) // the JSON's escaped quotes
		for _, m := range selectorRE.FindAllStringSubmatch(text, -1) {
			for _, mm := range matcherRE.FindAllStringSubmatch(m[2], -1) {
				if mm[1] == "job" || strings.HasPrefix(mm[2], "$") {
					continue
				}
				s := selector{m[1], mm[1], mm[2]}
				if !slices.Contains(out[s], rel) {
					out[s] = append(out[s], rel)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no label matchers found in deploy/: the pattern is wrong")
	}
	return out
}

// TestDeploy_EveryMetricNameExistsOnALiveMetricsPage runs a three-server
// cluster with a dashboard, a leader, a run, a queue worker and a doctor
// finding, scrapes the dashboard's /metrics and each process's --metrics,
// and checks that every baton_* name deploy/'s Prometheus rules and Grafana
// dashboard use is among the series served. It also checks that the files
// parse as what they claim to be.
func TestDeploy_EveryMetricNameExistsOnALiveMetricsPage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl := kvtest.StartCluster(t, 3)
	c := kvtest.Connect(t, cl.URLs())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, cfg := range []kv.BucketConfig{session.BucketConfig(session.DefaultPrefix, 3), lease.BucketConfig(lease.DefaultPrefix, 3), queue.BucketConfig(session.DefaultPrefix, 3), limits.BucketConfig(session.DefaultPrefix, 3)} {
		if _, err := c.Ensure(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	w := &world{t: t, url: cl.URLs(), client: c}
	h := w.host("h1")

	// A record that does not decode: the dashboard's doctor reports it.
	sessions := c.Bucket(session.BucketConfig(session.DefaultPrefix, 0))
	if _, err := sessions.Create(ctx, "garbage", []byte("not json"), time.Minute); err != nil {
		t.Fatal(err)
	}
	ui := h.startUI(t)

	// A leader (the dashboard sees it elected), a run, a queue with one
	// task run and one waiting behind it on the same key.
	lead := h.lead(t, "dep-1", "deploy-bot", []string{"--ttl", "2s", "--metrics", "127.0.0.1:0"}, nil, "sleep", "300")
	release := filepath.Join(t.TempDir(), "release")
	run := h.command("run", "dep-slot", "--task", "T", "--ttl", "1s", "--metrics", "127.0.0.1:0", "--",
		"sh", "-c", "while [ ! -e "+release+" ]; do sleep 0.05; done")
	runErr := &syncBuffer{}
	run.Stderr = runErr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(release, nil, 0o600); run.Process.Kill(); run.Wait() })
	h.must("queue", "create", "deployq", "--ttl", "1s", "--max-active", "1")
	h.must("queue", "add", "deployq", "--key", "k", "--id", "first", "--payload", "x")
	h.must("queue", "add", "deployq", "--key", "k", "--id", "waits", "--payload", "x")
	wk := h.startWorker(t, "deployq", "--metrics", "127.0.0.1:0", "--", "sh", "-c", "sleep 0.5")

	// A semaphore held with one waiting in line; a rate limiter, seen by
	// the dashboard, with a take admitted and one refused.
	h.must("sem", "create", "dep-sem", "--max", "1")
	h.must("rate", "create", "dep-rate", "--limit", "1/1m")
	for _, args := range [][]string{{"sem", "run", "dep-sem", "--", "sleep", "300"}, {"sem", "acquire", "dep-sem", "--wait", "5m"}} {
		c := h.command(args...)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		if args[1] == "run" {
			waitFor(t, 10*time.Second, "the permit held", func() bool {
				return strings.Contains(h.must("sem", "status", "dep-sem", "--json").stdout, `"held": 1`)
			})
		}
	}
	awaitMetrics(t, ui+"metrics", "the limiter seen", func(s map[string][]sample) bool {
		return value(s, "baton_rate_admitted_total", "limiter", "dep-rate") == 0
	})
	h.must("rate", "take", "dep-rate")
	h.expect(3, []string{"rate", "take", "dep-rate"})
	// Paths reserved, with a waiter in line behind them.
	h.must("reserve", "dep-space", "src/**", "--ttl", "5m")
	waiter := h.command("reserve", "dep-space", "src/main.go", "--wait", "5m")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = waiter.Process.Kill(); _ = waiter.Wait() })

	pages := map[string]string{
		"the dashboard": ui + "metrics",
		"baton lead":    metricsURL(t, lead.Stderr.(*syncBuffer)),
		"baton run":     metricsURL(t, runErr),
		"queue work":    metricsURL(t, wk.errs),
	}
	// Wait for what only shows once it happened: the dashboard's first
	// doctor check, a leadership change, a task started after waiting,
	// replicas reported; each process's renewals.
	awaitMetrics(t, pages["the dashboard"], "the dashboard's series", func(s map[string][]sample) bool {
		return value(s, "baton_doctor_findings", "kind", "undecodable") >= 1 &&
			value(s, "baton_leadership_changes_total", "agent_key", "deploy-bot") >= 1 &&
			value(s, "baton_agent_ttl_seconds", "agent_key", "deploy-bot") == 2 &&
			value(s, "baton_queue_wait_seconds", "queue", "deployq") >= 2 &&
			len(s["baton_stream_replica_lag"]) > 0 && len(s["baton_stream_leader_info"]) > 0 &&
			value(s, "baton_sem_waiters", "sem", "dep-sem") == 1 && value(s, "baton_sem_units_held", "sem", "dep-sem") == 1 &&
			value(s, "baton_rate_admitted_total", "limiter", "dep-rate") == 1 && value(s, "baton_rate_refused_total", "limiter", "dep-rate") == 1 &&
			value(s, "baton_reservations_held", "space", "dep-space", "mode", "exclusive") == 1 &&
			value(s, "baton_reservations_waiting", "space", "dep-space") == 1 && value(s, "baton_reservation_space_bytes", "space", "dep-space") > 0
	})
	awaitMetrics(t, pages["baton lead"], "the leader's series", func(s map[string][]sample) bool {
		return value(s, "baton_is_leader", "agent_key", "deploy-bot") == 1
	})
	awaitMetrics(t, pages["queue work"], "the worker's series", func(s map[string][]sample) bool {
		return value(s, "baton_tasks_total", "queue", "deployq", "outcome", "success") == 2
	})

	served := map[string]string{}              // family name -> page
	series := map[string][]map[string]string{} // family name -> each series' labels
	for page, url := range pages {
		for name, ss := range scrapeAt(t, url) {
			served[name] = page
			for _, s := range ss {
				series[name] = append(series[name], s.labels)
			}
		}
	}
	used := deployMetricNames(t)
	if len(used) < 20 {
		t.Fatalf("deploy/ uses %d metric names; the walk found too few to be the files", len(used))
	}
	for name, files := range used {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok {
				if _, isHist := served[b]; isHist {
					base = b
				}
			}
		}
		if _, ok := served[base]; !ok {
			t.Errorf("%s (used in %s) is on no live /metrics page", name, strings.Join(files, ", "))
		}
	}

	// Each label value a selector names exactly (name{label="value"}) is
	// one a live series carries: a misspelt state or reason matches nothing.
	for sel, files := range deploySelectors(t) {
		name := sel.name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && series[b] != nil {
				name = b
			}
		}
		found := false
		for _, labels := range series[name] {
			found = found || labels[sel.label] == sel.value
		}
		if !found {
			t.Errorf("%s{%s=%q} (used in %s) matches no live series", sel.name, sel.label, sel.value, strings.Join(files, ", "))
		}
	}

	checkAlertRules(t, filepath.Join(deployDir(t), "prometheus", "baton-alerts.yml"))
	checkScrapeConfig(t, filepath.Join(deployDir(t), "prometheus", "prometheus.yml"))
	checkGrafana(t, filepath.Join(deployDir(t), "grafana", "baton.json"))
}

// checkAlertRules: Prometheus' rule file shape, and each alert with an
// expression, a severity and a summary.
func checkAlertRules(t *testing.T, path string) {
	t.Helper()
	var doc struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	alerts := map[string]string{}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: rule %q lacks an alert name, expr, severity or summary", path, r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: %s: for %q: %v", path, r.Alert, r.For, err)
				}
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("%s: %s: unbalanced parentheses in %q", path, r.Alert, r.Expr)
			}
			alerts[r.Alert] = r.Expr
		}
	}
	// The alerts the deployment promises.
	for alert, mentions := range map[string]string{
		"BatonAgentLeaderless":     "baton_agent_ttl_seconds",
		"BatonStaleSessions":       `state="stale"`,
		"BatonRenewalFailures":     "baton_renewal_failures_total",
		"BatonQueueOldestPending":  "baton_queue_oldest_pending_age_seconds",
		"BatonQueuePaused":         "baton_queue_paused",
		"BatonSemaphoreWaitLong":   "baton_sem_oldest_wait_seconds",
		"BatonReservationWaitLong": "baton_reservation_oldest_wait_seconds",
		"BatonRateLimiterRefusing": "baton_rate_refused_total",
	} {
		if !strings.Contains(alerts[alert], mentions) {
			t.Errorf("%s: alert %s is missing or does not use %s: %q", path, alert, mentions, alerts[alert])
		}
	}
}

// checkScrapeConfig: the two jobs the rules and the dashboard select.
func checkScrapeConfig(t *testing.T, path string) {
	t.Helper()
	var doc struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var jobs []string
	for _, s := range doc.ScrapeConfigs {
		jobs = append(jobs, s.JobName)
	}
	if !slices.Contains(jobs, "baton-cluster") || !slices.Contains(jobs, "baton-process") || !slices.Contains(doc.RuleFiles, "baton-alerts.yml") {
		t.Errorf("%s: jobs %v, rule files %v; want baton-cluster, baton-process and baton-alerts.yml", path, jobs, doc.RuleFiles)
	}
}

// checkGrafana: a dashboard whose panels have queries on the jobs'
// variables and fit the 24-column grid without overlapping.
func checkGrafana(t *testing.T, path string) {
	t.Helper()
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			ID      int                      `json:"id"`
			Type    string                   `json:"type"`
			Title   string                   `json:"title"`
			GridPos struct{ X, Y, W, H int } `json:"gridPos"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("%s: title %q, uid %q, %d panels", path, dash.Title, dash.UID, len(dash.Panels))
	}
	taken := map[[2]int]string{}
	for _, p := range dash.Panels {
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("%s: panel %q at %+v is off the grid", path, p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[[2]int{x, y}]; ok {
					t.Errorf("%s: panels %q and %q overlap at %d,%d", path, other, p.Title, x, y)
					return
				}
				taken[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", path, p.Title)
		}
		for _, q := range p.Targets {
			if !strings.Contains(q.Expr, "$cluster_job") && !strings.Contains(q.Expr, "$process_job") {
				t.Errorf("%s: panel %q: %q selects no job variable", path, p.Title, q.Expr)
			}
		}
	}
}

// TestDeploy_SystemdUnitsVerify runs systemd-analyze verify on the units
// (with the unit's baton path pointing at the built binary), and requires
// no warning and an exposure level of at most 2 from systemd-analyze
// security.
func TestDeploy_SystemdUnitsVerify(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze on this machine")
	}
	dir := t.TempDir()
	src := filepath.Join(deployDir(t), "systemd")
	units := map[string]string{"baton-up@.service": "baton-up@n1.service", "baton-ui.service": "baton-ui.service"}
	for from, to := range units {
		b, err := os.ReadFile(filepath.Join(src, from))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "ExecStart=/usr/local/bin/baton ") {
			t.Fatalf("%s: ExecStart does not run /usr/local/bin/baton", from)
		}
		for _, want := range []string{"User=baton", "StateDirectory=", "CacheDirectory=baton", "Environment=XDG_CACHE_HOME=%C", "ProtectSystem=strict", "NoNewPrivileges=yes"} {
			if !strings.Contains(string(b), "\n"+want) {
				t.Errorf("%s: no %s", from, want)
			}
		}
		b = []byte(strings.ReplaceAll(string(b), "/usr/local/bin/baton", batonBin))
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, to := range units {
		out, err := exec.Command("systemd-analyze", "verify", filepath.Join(dir, to)).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", to, err, out)
		}
		out, _ = exec.Command("systemd-analyze", "security", "--offline=true", filepath.Join(dir, to)).CombinedOutput()
		m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			t.Errorf("systemd-analyze security %s gave no exposure level:\n%s", to, out)
			continue
		}
		if level, _ := strconv.ParseFloat(string(m[1]), 64); level > 2 {
			t.Errorf("%s: exposure level %s, want at most 2", to, m[1])
		}
	}
	// The sysusers file creates the user the units run as.
	b, err := os.ReadFile(filepath.Join(src, "baton.sysusers.conf"))
	if err != nil || !regexp.MustCompile(`(?m)^u baton `).Match(b) {
		t.Errorf("baton.sysusers.conf does not create the baton user: %q, %v", b, err)
	}
}
