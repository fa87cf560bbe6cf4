package web

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
)

// clusterMetrics is /metrics: the cluster as the model sees it, computed at
// each scrape (a custom collector), plus what the dashboard itself counts.
// It uses a registry of its own, never the global one.
type clusterMetrics struct {
	s          *Server
	reg        *prometheus.Registry
	wait       *prometheus.HistogramVec
	streams    prometheus.Gauge
	eventsSent prometheus.Counter
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descSessions    = desc("baton_sessions", "Sessions by state (live, stale, expiring), by the server's clock.", "state")
	descLeases      = desc("baton_leases", "Plain leases (not leaders or candidacies) by state.", "state")
	descUndecodable = desc("baton_undecodable_records", "Live session and lease records that do not decode (held by nobody knows whom).")
	descAgentKeys   = desc("baton_agent_keys", "Agent keys with a leader or a candidate, and whether they have a leader.", "led")
	descLeaderInfo  = desc("baton_agent_leader_info", "The leader of each agent key: 1 with its instance and host.", "agent_key", "instance", "host")
	descFence       = desc("baton_agent_leader_fence", "The fence of each agent key's leader.", "agent_key")
	descTermAge     = desc("baton_agent_term_age_seconds", "How long each agent key's leader has led (from its acquired_at).", "agent_key")
	descCandidates  = desc("baton_agent_candidates", "Live candidates of each agent key.", "agent_key")
	descLeaderless  = desc("baton_agent_leaderless_seconds", "How long each agent key has had no leader (0 while led).", "agent_key")
	descAgentTTL    = desc("baton_agent_ttl_seconds", "The TTL of each agent key's leadership (of its leader, else of its last candidacy seen): alert on leaderless_seconds against it.", "agent_key")
	descChanges     = desc("baton_leadership_changes_total", "Leadership changes seen since the dashboard started, by reason (elected, transfer, expiry, takeover, resign).", "agent_key", "reason")
	descQueueTasks  = desc("baton_queue_tasks", "Tasks of each queue by state.", "queue", "state")
	descQueuePend   = desc("baton_queue_pending", "Tasks waiting to run, by priority.", "queue", "priority")
	descQueueActive = desc("baton_queue_active", "Tasks running (capacity used).", "queue")
	descQueueMax    = desc("baton_queue_max_active", "The queue's max_active (0: no limit).", "queue")
	descQueueOldest = desc("baton_queue_oldest_pending_age_seconds", "Age of the oldest waiting task (0 when none waits).", "queue")
	descQueuePause  = desc("baton_queue_paused", "1 while the queue is paused (nothing new starts), else 0.", "queue")
	descQueuePKeys  = desc("baton_queue_paused_keys", "Keys of the queue whose starts are paused.", "queue")
	descQueueDelay  = desc("baton_queue_delayed_tasks", "Pending tasks whose run-at time has not come (counted in baton_queue_pending too).", "queue")
	descSemMax      = desc("baton_sem_max", "A semaphore's max: the units it has (on each host, for a per-host one: host is set).", "sem", "host")
	descSemHeld     = desc("baton_sem_units_held", "Units of a semaphore held by live permits (weights counted).", "sem", "host")
	descSemPermits  = desc("baton_sem_permits", "Live permits of a semaphore.", "sem", "host")
	descSemWaiters  = desc("baton_sem_waiters", "Acquirers waiting in a semaphore's line.", "sem", "host")
	descSemWaitAge  = desc("baton_sem_oldest_wait_seconds", "How long the first in a semaphore's line has waited (0 when none waits).", "sem", "host")
	descRateMax     = desc("baton_rate_limit", "A rate limiter's limit: what any window of its period may admit (max plus burst).", "limiter", "limit")
	descRateUsed    = desc("baton_rate_used", "What a rate limiter's limit counted in the window ending now.", "limiter", "limit")
	descRateAdm     = desc("baton_rate_admitted_total", "Takes a rate limiter admitted since the dashboard started.", "limiter")
	descRateAdmCost = desc("baton_rate_admitted_cost_total", "Cost a rate limiter admitted since the dashboard started (as taken, before any settle).", "limiter")
	descRateRef     = desc("baton_rate_refused_total", "Takes a rate limiter refused since the dashboard started (as its takers told; a take that waited and was admitted is not counted).", "limiter")
	descRateRefCost = desc("baton_rate_refused_cost_total", "Cost of the takes a rate limiter refused since the dashboard started.", "limiter")
	descResvHeld    = desc("baton_reservations_held", "Path reservations held in a space (not expired), by mode (shared, exclusive).", "space", "mode")
	descResvWaiting = desc("baton_reservations_waiting", "Path reservations waiting in a space's line.", "space")
	descResvBytes   = desc("baton_reservation_space_bytes", "The size of a reservation space's record: it holds what fits in one message of the server's.", "space")
	descResvWaitAge = desc("baton_reservation_oldest_wait_seconds", "How long the longest waiter of a reservation space has waited (0 when none waits).", "space")
	descFindings    = desc("baton_doctor_findings", "Problems the doctor found in its last check, by kind.", "kind")
	descDoctorAt    = desc("baton_doctor_last_check_timestamp_seconds", "When the doctor last checked.")
	descSkew        = desc("baton_server_skew_seconds", "This host's clock less the server's.")
	descConnected   = desc("baton_server_connected", "1 while the dashboard's server answers.")
	descStreamLead  = desc("baton_stream_leader_info", "The server that leads each bucket's stream.", "bucket", "server")
	descStreamLag   = desc("baton_stream_replica_lag", "Operations a follower copy of a bucket's stream is behind its leader.", "bucket", "server")
	descUIInfo      = desc("baton_ui_info", "The dashboard: 1 with its version and prefix.", "version", "prefix")
)

func newClusterMetrics(s *Server) *clusterMetrics {
	cm := &clusterMetrics{
		s:   s,
		reg: prometheus.NewRegistry(),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_queue_wait_seconds",
			Help:    "How long tasks waited from their add to their start, for starts seen by the dashboard.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 12), // 5 ms to about 6 h
		}, []string{"queue"}),
		streams:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_ui_event_streams", Help: "Browsers (event streams) connected."}),
		eventsSent: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_ui_events_sent_total", Help: "Changes sent on event streams."}),
	}
	cm.reg.MustRegister(cm, cm.wait, cm.streams, cm.eventsSent,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return cm
}

func (cm *clusterMetrics) observeWait(q string, d time.Duration) {
	cm.wait.WithLabelValues(q).Observe(d.Seconds())
}

// Describe sends nothing: the collector is unchecked, since the agent keys
// and queues it reports come and go.
func (cm *clusterMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect reports the cluster as the model holds it now.
func (cm *clusterMetrics) Collect(ch chan<- prometheus.Metric) {
	s := cm.s
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descUIInfo, 1, s.version, s.m.Prefix())
	c := s.model.Counts(s.staleAfter)
	for _, st := range []session.State{session.StateLive, session.StateStale, session.StateExpiring} {
		gauge(descSessions, float64(c.Sessions[string(st)]), string(st))
		gauge(descLeases, float64(c.Leases[string(st)]), string(st))
	}
	gauge(descUndecodable, float64(c.Undecodable))
	gauge(descAgentKeys, float64(c.Leaders), "true")
	gauge(descAgentKeys, float64(c.Leaderless), "false")
	cm.collectAgents(ch)

	if s.queues != nil {
		for _, q := range s.queues.Names() {
			snap := s.queues.Snapshot(q)
			if snap == nil {
				continue
			}
			for _, st := range queue.States {
				gauge(descQueueTasks, float64(snap.Counts[st]), q, string(st))
			}
			for _, p := range queue.Priorities {
				gauge(descQueuePend, float64(snap.Pending.ByPriority[p]), q, string(p))
			}
			gauge(descQueueActive, float64(snap.Active.Used), q)
			gauge(descQueueMax, float64(snap.Config.MaxActive), q)
			gauge(descQueueOldest, snap.Pending.OldestAge.Seconds(), q)
			gauge(descQueueDelay, float64(snap.Pending.Delayed), q)
			paused := 0.0
			if snap.Config.Paused {
				paused = 1
			}
			gauge(descQueuePause, paused, q)
			gauge(descQueuePKeys, float64(len(snap.PausedKeys())), q)
		}
	}
	if s.limits != nil {
		cm.collectLimits(ch)
	}
	if s.spaces != nil {
		cm.collectSpaces(ch)
	}
	if r, at := s.Report(); r != nil {
		by := map[string]int{}
		for _, f := range r.Findings {
			by[f.Kind]++
		}
		for kind, n := range by {
			gauge(descFindings, float64(n), kind)
		}
		gauge(descDoctorAt, float64(at.UnixNano())/1e9)
	}
	h := s.Health()
	if !h.Checked.IsZero() {
		connected := 0.0
		if h.Connected {
			connected = 1
			gauge(descSkew, float64(h.SkewMS)/1000)
		}
		gauge(descConnected, connected)
		for _, st := range h.Streams {
			if st.Leader != "" {
				gauge(descStreamLead, 1, st.Bucket, st.Leader)
			}
			for _, p := range st.Peers {
				gauge(descStreamLag, float64(p.Lag), st.Bucket, p.Name)
			}
		}
	}
}

// collectAgents reports per agent key, for at most maxAgents keys (sorted;
// the rest are only counted in baton_agent_keys).
func (cm *clusterMetrics) collectAgents(ch chan<- prometheus.Metric) {
	md := cm.s.model
	md.mu.RLock()
	defer md.mu.RUnlock()
	now := md.serverNowLocked()
	cm.s.mu.RLock()
	started := cm.s.started
	cm.s.mu.RUnlock()
	keys := md.agentKeys()
	if len(keys) > cm.s.maxAgents {
		keys = keys[:cm.s.maxAgents]
	}
	for _, k := range keys {
		a := md.agents[k]
		ch <- prometheus.MustNewConstMetric(descCandidates, prometheus.GaugeValue, float64(len(a.cands)), k)
		leaderless := 0.0
		if a.leader != nil {
			l := a.leader
			ch <- prometheus.MustNewConstMetric(descLeaderInfo, prometheus.GaugeValue, 1, k, l.Holder, l.Host)
			ch <- prometheus.MustNewConstMetric(descFence, prometheus.GaugeValue, float64(l.Fence), k)
			if !l.AcquiredAt.IsZero() {
				ch <- prometheus.MustNewConstMetric(descTermAge, prometheus.GaugeValue, max(now.Sub(l.AcquiredAt).Seconds(), 0), k)
			}
		} else if !a.leaderless.IsZero() {
			leaderless = max(now.Sub(a.leaderless).Seconds(), 0)
		} else {
			// Candidates but never a leader seen: leaderless since the
			// dashboard started, as far as it knows.
			if !started.IsZero() {
				leaderless = max(cm.s.now().Sub(started).Seconds(), 0)
			}
		}
		ch <- prometheus.MustNewConstMetric(descLeaderless, prometheus.GaugeValue, leaderless, k)
		if a.ttl > 0 {
			ch <- prometheus.MustNewConstMetric(descAgentTTL, prometheus.GaugeValue, a.ttl.Seconds(), k)
		}
		reasons := make([]string, 0, len(a.counts))
		for r := range a.counts {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			ch <- prometheus.MustNewConstMetric(descChanges, prometheus.CounterValue, float64(a.counts[r]), k, r)
		}
	}
}

// collectLimits reports each semaphore and rate limiter, at most
// maxAgents of each (sorted by name): they are made by operators, not per
// task, but a cap keeps a mistake from flooding Prometheus.
func (cm *clusterMetrics) collectLimits(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	now := cm.s.model.ServerNow()
	sems := cm.s.limits.Semaphores()
	for _, v := range sems[:min(len(sems), cm.s.maxAgents)] {
		if v.Error != "" && v.Max == 0 {
			continue
		}
		scopes := []sem.Status{v.Status}
		if v.PerHost {
			scopes = v.Hosts // hosts that hold or wait; none: no series
		}
		for _, st := range scopes {
			gauge(descSemMax, float64(st.Max), st.Name, st.Host)
			gauge(descSemHeld, float64(st.Held), st.Name, st.Host)
			gauge(descSemPermits, float64(len(st.Holders)), st.Name, st.Host)
			gauge(descSemWaiters, float64(len(st.Waiters)), st.Name, st.Host)
			oldest := 0.0
			if len(st.Waiters) > 0 && !st.Waiters[0].Since.IsZero() {
				oldest = max(now.Sub(st.Waiters[0].Since).Seconds(), 0)
			}
			gauge(descSemWaitAge, oldest, st.Name, st.Host)
		}
	}
	lims := cm.s.limits.Limiters()
	for _, v := range lims[:min(len(lims), cm.s.maxAgents)] {
		seen := map[string]bool{} // a limit given twice is one series
		for _, u := range v.Limits {
			if seen[u.Limit] {
				continue
			}
			seen[u.Limit] = true
			gauge(descRateMax, float64(u.Max+u.Burst), v.Name, u.Limit)
			gauge(descRateUsed, float64(u.Used), v.Name, u.Limit)
		}
		counter(descRateAdm, float64(v.Admitted), v.Name)
		counter(descRateAdmCost, float64(v.AdmittedCost), v.Name)
		counter(descRateRef, float64(v.Refused), v.Name)
		counter(descRateRefCost, float64(v.RefusedCost), v.Name)
	}
}

// collectSpaces reports each reservation space, at most maxAgents of them
// (sorted by name): a fleet has a space per repository, not per task.
func (cm *clusterMetrics) collectSpaces(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	spaces := cm.s.spaces.Spaces()
	for _, v := range spaces[:min(len(spaces), cm.s.maxAgents)] {
		gauge(descResvHeld, float64(v.HeldShared), v.Space, "shared")
		gauge(descResvHeld, float64(v.Held-v.HeldShared), v.Space, "exclusive")
		gauge(descResvWaiting, float64(v.Waiting), v.Space)
		gauge(descResvBytes, float64(v.Size), v.Space)
		gauge(descResvWaitAge, float64(v.OldestWaitMS)/1000, v.Space)
	}
}
