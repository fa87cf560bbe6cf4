package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/doctor"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
)

// Server is the dashboard of one cluster (one prefix): its model, kept by
// Run, and its HTTP handler.
type Server struct {
	m  *session.Manager
	ls *lease.Leases
	qs *queue.Queues
	ss *sem.Semaphores
	rl *rate.Limiters
	rs *reserve.Spaces

	readOnly    bool
	token       string
	log         *slog.Logger
	staleAfter  time.Duration
	batch       time.Duration
	healthEvery time.Duration
	doctorEvery time.Duration
	maxAgents   int
	now         func() time.Time
	version     string

	hub     *hub
	model   *Model
	queues  *queues
	limits  *limitsTracker
	spaces  *spacesTracker
	metrics *clusterMetrics

	mu       sync.RWMutex
	health   Health
	report   *doctor.Report
	reportAt time.Time
	started  time.Time
}

// Option configures a Server.
type Option func(*Server) error

// WithReadOnly hides every action and makes the API refuse them (403).
func WithReadOnly(on bool) Option { return func(s *Server) error { s.readOnly = on; return nil } }

// WithToken requires the token on every request but /healthz and /readyz:
// as "Authorization: Bearer TOKEN", or once as ?token=TOKEN, which sets a
// cookie (HttpOnly, SameSite=Strict) for the browser. Empty: no token.
func WithToken(token string) Option { return func(s *Server) error { s.token = token; return nil } }

// WithLogger logs actions (what, from where, the result) and watch errors
// to l. Default: nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(s *Server) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalid)
		}
		s.log = l
		return nil
	}
}

// WithStaleAfter calls a session or lease stale when not renewed for d
// (default 0: half its TTL, as `baton status`).
func WithStaleAfter(d time.Duration) Option {
	return func(s *Server) error {
		if d < 0 {
			return fmt.Errorf("%w: stale-after %s is negative", ErrInvalid, d)
		}
		s.staleAfter = d
		return nil
	}
}

// WithBatch is how long the event stream gathers changes before it sends
// them (default 50 ms); a key that changes again meanwhile is sent once.
func WithBatch(d time.Duration) Option {
	return func(s *Server) error {
		if d <= 0 || d > time.Second {
			return fmt.Errorf("%w: event batch %s must be in (0, 1s]", ErrInvalid, d)
		}
		s.batch = d
		return nil
	}
}

// WithMaxAgentKeys caps the agent keys labelled in metrics (default 1000).
func WithMaxAgentKeys(n int) Option {
	return func(s *Server) error {
		if n < 1 {
			return fmt.Errorf("%w: max agent keys %d must be at least 1", ErrInvalid, n)
		}
		s.maxAgents = n
		return nil
	}
}

// WithLimits shows the semaphores and rate limiters of ss and rl (either
// may be nil) on the Limits page, in /metrics and to the doctor. rl's
// prefix is the one whose refusal notices are counted.
func WithLimits(ss *sem.Semaphores, rl *rate.Limiters) Option {
	return func(s *Server) error { s.ss, s.rl = ss, rl; return nil }
}

// WithReservations shows the path reservation spaces of rs on the
// Reservations page, in /metrics and to the doctor.
func WithReservations(rs *reserve.Spaces) Option {
	return func(s *Server) error { s.rs = rs; return nil }
}

// WithVersion is the version the overview and baton_ui_info show.
func WithVersion(v string) Option { return func(s *Server) error { s.version = v; return nil } }

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(s *Server) error { s.now = now; return nil } }

// New returns the dashboard of the cluster that m, ls and qs reach (qs may
// be nil: no queues). Run must run for it to show anything.
func New(m *session.Manager, ls *lease.Leases, qs *queue.Queues, opts ...Option) (*Server, error) {
	if m == nil || ls == nil {
		return nil, fmt.Errorf("%w: the dashboard needs sessions and leases", ErrInvalid)
	}
	s := &Server{
		m: m, ls: ls, qs: qs,
		log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		batch: 50 * time.Millisecond, healthEvery: 5 * time.Second, doctorEvery: 30 * time.Second,
		maxAgents: 1000, now: time.Now, version: "dev",
	}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	s.hub = newHub()
	s.metrics = newClusterMetrics(s)
	s.model = newModel(s.now, s.hub.publish)
	if qs != nil {
		s.queues = newQueues(qs, s.hub.publish, s.metrics.observeWait)
	}
	if s.ss != nil || s.rl != nil {
		s.limits = newLimitsTracker(s.ss, s.rl, s.m.Prefix(), s.model.ServerNow, s.hub.publish)
	}
	if s.rs != nil {
		s.spaces = newSpacesTracker(s.rs, s.model.ServerNow, s.hub.publish)
	}
	return s, nil
}

// Model is what the dashboard knows of the cluster.
func (s *Server) Model() *Model { return s.model }

// Registry is the Prometheus registry /metrics serves; a caller may add
// its own collectors to it.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// Run keeps the model current from watches, and the servers' health and
// the doctor's report fresh, until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	s.started = s.now()
	s.mu.Unlock()
	onErr := func(what string) func(error) {
		return func(err error) { s.log.Warn("watch ended; watching again", "what", what, "err", err) }
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.model.runSessions(ctx, s.m, onErr("sessions")) })
	wg.Go(func() { s.model.runLeases(ctx, s.ls, onErr("leases")) })
	if s.queues != nil {
		wg.Go(func() { s.queues.run(ctx, onErr("queues")) })
	}
	if s.limits != nil {
		wg.Go(func() { s.limits.run(ctx, onErr("limits")) })
	}
	if s.spaces != nil {
		wg.Go(func() { s.spaces.run(ctx, onErr("reservations")) })
	}
	wg.Go(func() { s.every(ctx, s.healthEvery, s.checkHealth) })
	wg.Go(func() {
		// The doctor reads every session: not while the watches are
		// still reading them all, which would hold both at once; but after
		// one period anyway (a watch that cannot start, a missing bucket,
		// is what the doctor is there to report).
		select {
		case <-ctx.Done():
			return
		case <-s.model.firstSynced():
		case <-time.After(s.doctorEvery):
		}
		s.every(ctx, s.doctorEvery, s.runDoctor)
	})
	wg.Wait()
	return nil
}

// every runs fn now and then every d until ctx is done.
func (s *Server) every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Health is the servers as the dashboard last saw them.
type Health struct {
	// Connected: the last request to the server was answered.
	Connected  bool   `json:"connected"`
	URL        string `json:"url"`
	ServerName string `json:"server_name"`
	Version    string `json:"server_version"`
	// JetStream: the buckets' streams answered.
	JetStream bool              `json:"jetstream"`
	Streams   []kv.StreamStatus `json:"streams"`
	Servers   []ServerHealth    `json:"servers"`
	Error     string            `json:"error,omitempty"`
	SkewMS    int64             `json:"skew_ms"` // this host's clock less the server's
	Checked   time.Time         `json:"checked_at"`
	Buckets   map[string]bool   `json:"buckets"` // present, by bucket
}

// ServerHealth is one server as the streams' leaders report it.
type ServerHealth struct {
	Name string `json:"name"`
	// Reachable: no stream reports it offline.
	Reachable bool `json:"reachable"`
	// Leads are the buckets whose stream it leads.
	Leads []string `json:"leads"`
	// Lag is the most operations it is behind on any stream it follows.
	Lag uint64 `json:"lag"`
	// Connected: the dashboard's own connection is to it.
	Connected bool `json:"connected"`
}

func (s *Server) buckets() []*kv.Bucket {
	b := []*kv.Bucket{s.m.Bucket(), s.ls.Bucket()}
	if s.qs != nil {
		b = append(b, s.qs.Bucket())
	}
	switch {
	case s.limits != nil:
		b = append(b, s.limits.bucket())
	case s.spaces != nil:
		b = append(b, s.spaces.bucket) // the same bucket
	}
	return b
}

// checkHealth reads the server's time and each bucket's stream state.
func (s *Server) checkHealth(ctx context.Context) {
	nc := s.m.Bucket().Client().Conn()
	h := Health{URL: kv.RedactURL(nc.ConnectedUrl()), ServerName: nc.ConnectedServerName(), Version: nc.ConnectedServerVersion(),
		Streams: []kv.StreamStatus{}, Servers: []ServerHealth{}, Buckets: map[string]bool{}, Checked: s.now()}
	began := s.now()
	st, err := s.m.ServerTime(ctx)
	if err == nil {
		h.Connected = true
		local := began.Add(s.now().Sub(began) / 2)
		s.model.setServerTime(st, local)
		h.SkewMS = local.Sub(st).Milliseconds()
	} else {
		h.Error = err.Error()
	}
	servers := map[string]*ServerHealth{}
	get := func(name string) *ServerHealth {
		if servers[name] == nil {
			servers[name] = &ServerHealth{Name: name, Reachable: true, Leads: []string{}, Connected: name == h.ServerName}
		}
		return servers[name]
	}
	for _, b := range s.buckets() {
		ss, err := b.Status(ctx)
		if err != nil {
			h.Buckets[b.Name()] = false
			if !errors.Is(err, kv.ErrBucketNotFound) && h.Error == "" {
				h.Error = err.Error()
			}
			continue
		}
		h.Buckets[b.Name()] = true
		h.JetStream = true
		h.Streams = append(h.Streams, ss)
		if ss.Leader != "" {
			l := get(ss.Leader)
			l.Leads = append(l.Leads, ss.Bucket)
		}
		for _, p := range ss.Peers {
			sv := get(p.Name)
			if p.Offline {
				sv.Reachable = false
			}
			sv.Lag = max(sv.Lag, p.Lag)
		}
	}
	if h.ServerName != "" && h.Connected {
		get(h.ServerName)
	}
	for _, sv := range servers {
		h.Servers = append(h.Servers, *sv)
	}
	slices.SortFunc(h.Servers, func(a, b ServerHealth) int { return strings.Compare(a.Name, b.Name) })
	s.mu.Lock()
	s.health = h
	s.mu.Unlock()
	s.hub.publish(KindOverview, "")
}

// Health is the servers as last checked.
func (s *Server) Health() Health {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.health
}

// Ready: connected, every bucket present, and both watches have delivered
// what was present.
func (s *Server) Ready() (bool, string) {
	h := s.Health()
	switch {
	case !h.Connected:
		return false, "not connected to the server: " + h.Error
	case !h.Buckets[s.m.Bucket().Name()] || !h.Buckets[s.ls.Bucket().Name()]:
		return false, "the buckets are missing: run `baton up`, or `baton doctor --fix`"
	case !s.model.Synced():
		return false, "reading the sessions and leases"
	}
	return true, "ready"
}

func (s *Server) checker() *doctor.Checker {
	opts := []doctor.Option{doctor.WithStaleAfter(s.staleAfter), doctor.WithLeases(s.ls), doctor.WithListing(s.listing)}
	if s.qs != nil {
		opts = append(opts, doctor.WithQueues(s.qs))
	}
	if s.ss != nil {
		opts = append(opts, doctor.WithSemaphores(s.ss))
	}
	if s.rl != nil {
		opts = append(opts, doctor.WithLimiters(s.rl))
	}
	if s.rs != nil {
		opts = append(opts, doctor.WithReservations(s.rs))
	}
	return doctor.New(s.m, opts...)
}

// listing is the sessions as the model holds them (the doctor's, so that
// it does not read 100k records again every half minute), with the
// server's time read after. Before the model is synced, the bucket's.
func (s *Server) listing(ctx context.Context) (*session.Listing, error) {
	if !s.model.Synced() {
		return s.m.List(ctx)
	}
	l := s.model.listing()
	now, err := s.m.ServerTime(ctx)
	if err != nil {
		return nil, err
	}
	l.ServerTime = now
	return l, nil
}

// runDoctor refreshes the doctor's report.
func (s *Server) runDoctor(ctx context.Context) {
	r, err := s.checker().Run(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("doctor could not check", "err", err)
		}
		return
	}
	s.setReport(r)
}

func (s *Server) setReport(r *doctor.Report) {
	if r.Findings == nil {
		r.Findings = []doctor.Finding{}
	}
	s.mu.Lock()
	s.report, s.reportAt = r, s.now()
	s.mu.Unlock()
	s.hub.publish(KindOverview, "")
}

// Report is the doctor's last report and when it was made (nil: none yet).
func (s *Server) Report() (*doctor.Report, time.Time) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.report, s.reportAt
}

// CheckListen refuses to serve on addr beyond loopback with neither a
// token nor read-only mode (ErrUnsafeListen), and an address that is not
// HOST:PORT (ErrInvalid).
func CheckListen(addr, token string, readOnly bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: listen address %q is not HOST:PORT: %w", ErrInvalid, addr, err)
	}
	if isLoopback(host) || token != "" || readOnly {
		return nil
	}
	return fmt.Errorf("%w: anyone who can reach %s could act on the cluster", ErrUnsafeListen, addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
