package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/view"
)

// Handler is the dashboard: the page, /api/v1/, /metrics, /healthz and
// /readyz, behind the token check, the cross-origin check and the
// security headers.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := s.Ready()
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, map[string]any{"ok": ok, "detail": why})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))

	mux.HandleFunc("GET /api/v1/config", s.apiConfig)
	mux.HandleFunc("GET /api/v1/overview", s.apiOverview)
	mux.HandleFunc("GET /api/v1/status", s.apiStatus)
	mux.HandleFunc("GET /api/v1/sessions", s.apiSessions)
	mux.HandleFunc("GET /api/v1/sessions/{slot}", s.apiSession)
	mux.HandleFunc("GET /api/v1/leases", s.apiLeases)
	mux.HandleFunc("GET /api/v1/agents", s.apiAgents)
	mux.HandleFunc("GET /api/v1/agents/{key}", s.apiAgent)
	mux.HandleFunc("GET /api/v1/queues", s.apiQueues)
	mux.HandleFunc("GET /api/v1/queues/{queue}", s.apiQueue)
	mux.HandleFunc("GET /api/v1/limits", s.apiLimits)
	mux.HandleFunc("GET /api/v1/limits/semaphores/{name}", s.apiSemaphore)
	mux.HandleFunc("GET /api/v1/limits/limiters/{name}", s.apiLimiter)
	mux.HandleFunc("GET /api/v1/reservations", s.apiReservations)
	// {space...}: a space's name may hold '/' (github.com/org/repo), sent
	// as it is or escaped.
	mux.HandleFunc("GET /api/v1/reservations/{space...}", s.apiSpace)
	mux.HandleFunc("GET /api/v1/doctor", s.apiDoctor)
	mux.HandleFunc("GET /api/v1/events", s.apiEvents)

	mux.HandleFunc("POST /api/v1/agents/{key}/transfer", s.action("transfer", s.actTransfer))
	mux.HandleFunc("POST /api/v1/agents/{key}/resign", s.action("resign", s.actResign))
	mux.HandleFunc("POST /api/v1/doctor/fix", s.action("doctor fix", s.actDoctorFix))
	mux.HandleFunc("POST /api/v1/queues/{queue}/tasks/{id}/cancel", s.action("queue cancel", s.actCancel))
	mux.HandleFunc("POST /api/v1/queues/{queue}/tasks/{id}/retry", s.action("queue retry", s.actRetry))
	mux.HandleFunc("POST /api/v1/queues/{queue}/keys/{key}/release", s.action("queue release", s.actRelease))
	mux.HandleFunc("POST /api/v1/queues/{queue}/pause", s.action("queue pause", s.pauseAction(true)))
	mux.HandleFunc("POST /api/v1/queues/{queue}/resume", s.action("queue resume", s.pauseAction(false)))
	mux.HandleFunc("POST /api/v1/queues/{queue}/keys/{key}/pause", s.action("queue pause --key", s.pauseAction(true)))
	mux.HandleFunc("POST /api/v1/queues/{queue}/keys/{key}/resume", s.action("queue resume --key", s.pauseAction(false)))
	mux.HandleFunc("POST /api/v1/queues/{queue}/schedules/{name}/pause", s.action("queue schedule pause", s.scheduleAction(true)))
	mux.HandleFunc("POST /api/v1/queues/{queue}/schedules/{name}/resume", s.action("queue schedule resume", s.scheduleAction(false)))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		// An action asked with GET (or a view with POST) is 405, naming the
		// method that works; anything else is not an API.
		for _, m := range []string{http.MethodPost, http.MethodGet} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); m != r.Method && pattern != "/api/" {
				w.Header().Set("Allow", m)
				writeJSON(w, http.StatusMethodNotAllowed, APIError{Error: fmt.Sprintf("web: %s %s: use %s", r.Method, r.URL.Path, m), Code: 2})
				return
			}
		}
		writeError(w, fmt.Errorf("%w: no API at %s %s", ErrNotFound, r.Method, r.URL.Path))
	})

	mux.Handle("/", s.assets())
	return s.secure(mux)
}

// Config is what the page needs to know of the dashboard itself.
type Config struct {
	ReadOnly bool   `json:"read_only"`
	Prefix   string `json:"prefix"`
	Host     string `json:"host"`
	Version  string `json:"version"`
	// StaleAfterMS is --stale-after (0: half of each TTL).
	StaleAfterMS int64     `json:"stale_after_ms"`
	Started      time.Time `json:"started_at"`
}

func (s *Server) apiConfig(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	started := s.started
	s.mu.RUnlock()
	writeJSON(w, http.StatusOK, Config{ReadOnly: s.readOnly, Prefix: s.m.Prefix(), Host: s.m.Host(),
		Version: s.version, StaleAfterMS: s.staleAfter.Milliseconds(), Started: started})
}

// Overview is the first page: the servers, the counts, the queues and the
// doctor's summary.
type Overview struct {
	ServerTime time.Time       `json:"server_time"`
	Health     Health          `json:"health"`
	Counts     Counts          `json:"counts"`
	Queues     []queue.Summary `json:"queues"`
	// Limits is nil when the dashboard shows no limits.
	Limits *LimitsSummary `json:"limits,omitempty"`
	// Reservations is nil when the dashboard shows no reservations.
	Reservations *ReservationsSummary `json:"reservations,omitempty"`
	Doctor       *DoctorSummary       `json:"doctor"`
}

// DoctorSummary is the doctor's last report in counts.
type DoctorSummary struct {
	OK       bool           `json:"ok"`
	Findings int            `json:"findings"`
	ByKind   map[string]int `json:"by_kind"`
	At       time.Time      `json:"checked_at"`
}

func (s *Server) overview() Overview {
	o := Overview{ServerTime: s.model.ServerNow(), Health: s.Health(), Counts: s.model.Counts(s.staleAfter), Queues: []queue.Summary{}}
	if s.queues != nil {
		o.Queues = s.queues.Summaries()
	}
	if s.limits != nil {
		sum := s.limits.Summary()
		o.Limits = &sum
	}
	if s.spaces != nil {
		sum := s.spaces.Summary()
		o.Reservations = &sum
	}
	if r, at := s.Report(); r != nil {
		d := &DoctorSummary{OK: r.OK, Findings: len(r.Findings), ByKind: map[string]int{}, At: at}
		for _, f := range r.Findings {
			d.ByKind[f.Kind]++
		}
		o.Doctor = d
	}
	return o
}

func (s *Server) apiOverview(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.overview())
}

// apiStatus is `baton status --json`, from the model.
func (s *Server) apiStatus(w http.ResponseWriter, r *http.Request) {
	var queues []queue.Summary
	if s.queues != nil {
		queues = s.queues.Summaries()
	}
	doc, err := s.model.Status(queues, s.staleAfter)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

func (s *Server) apiSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sq := SessionQuery{Text: q.Get("q"), Host: q.Get("host"), State: q.Get("state"), Sort: q.Get("sort"), Desc: q.Get("desc") == "1" || q.Get("desc") == "true"}
	var err error
	if sq.Offset, err = intParam(q.Get("offset"), 0); err == nil {
		sq.Limit, err = intParam(q.Get("limit"), 100)
	}
	if err == nil && sq.State != "" && sq.State != string(session.StateLive) && sq.State != string(session.StateStale) && sq.State != string(session.StateExpiring) {
		err = fmt.Errorf("%w: state %q: want live, stale or expiring", ErrInvalid, sq.State)
	}
	if err == nil && sq.Sort != "" && sessionSorts[sq.Sort] == nil {
		err = fmt.Errorf("%w: sort %q: want slot, task, agent, host, pid, fence, age or left", ErrInvalid, sq.Sort)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	page, err := s.model.Sessions(sq, s.staleAfter)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func intParam(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %q is not a whole number of at least 0", ErrInvalid, v)
	}
	return n, nil
}

func (s *Server) apiSession(w http.ResponseWriter, r *http.Request) {
	row, err := s.model.sessionRow(r.PathValue("slot"), s.staleAfter)
	switch {
	case err != nil:
		writeError(w, err)
	case row == nil:
		writeError(w, fmt.Errorf("%w: no session holds slot %q", ErrNotFound, r.PathValue("slot")))
	default:
		writeJSON(w, http.StatusOK, row)
	}
}

func (s *Server) apiLeases(w http.ResponseWriter, r *http.Request) {
	rows, now, err := s.model.Leases(s.staleAfter)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"leases": rows, "server_time": now})
}

func (s *Server) apiAgents(w http.ResponseWriter, r *http.Request) {
	agents, now, err := s.model.Agents()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": agents, "server_time": now})
}

// apiAgent is one agent key, in the shape of `baton leader KEY --json`
// plus the dashboard's fields (last_seen, quiet, changes).
func (s *Server) apiAgent(w http.ResponseWriter, r *http.Request) {
	v, err := s.model.Agent(r.PathValue("key"))
	switch {
	case err != nil:
		writeError(w, err)
	case v == nil:
		writeError(w, fmt.Errorf("%w: no leader or candidate of agent key %q", ErrNotFound, r.PathValue("key")))
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

func (s *Server) apiQueues(w http.ResponseWriter, r *http.Request) {
	out := []queue.Summary{}
	if s.queues != nil {
		out = s.queues.Summaries()
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": out, "server_time": s.model.ServerNow()})
}

// apiQueue is `baton queue status Q --json` (with ?tasks=1, its --tasks).
func (s *Server) apiQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if s.queues == nil {
		writeError(w, fmt.Errorf("%w: no queue %q", ErrNotFound, name))
		return
	}
	var snap *queue.Snapshot
	tasks := r.URL.Query().Get("tasks") == "1"
	if tasks {
		var err error
		if snap, err = s.qs.Snapshot(r.Context(), name, queue.WithTasks()); err != nil {
			writeError(w, err)
			return
		}
	} else if snap = s.queues.Snapshot(name); snap == nil {
		writeError(w, fmt.Errorf("%w: no queue %q", ErrNotFound, name))
		return
	}
	doc, err := view.QueueStatusJSON(snap, r.URL.Query().Get("by"), tasks)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// Limits is the Limits page: every semaphore and rate limiter.
type Limits struct {
	Semaphores []SemaphoreView `json:"semaphores"`
	Limiters   []LimiterView   `json:"limiters"`
	ServerTime time.Time       `json:"server_time"`
}

func (s *Server) apiLimits(w http.ResponseWriter, r *http.Request) {
	out := Limits{Semaphores: []SemaphoreView{}, Limiters: []LimiterView{}, ServerTime: s.model.ServerNow()}
	if s.limits != nil {
		out.Semaphores, out.Limiters = s.limits.Semaphores(), s.limits.Limiters()
	}
	writeJSON(w, http.StatusOK, out)
}

// apiSemaphore is one semaphore, in the shape of `baton sem status NAME
// --json`.
func (s *Server) apiSemaphore(w http.ResponseWriter, r *http.Request) {
	var v *SemaphoreView
	if s.limits != nil {
		v = s.limits.Semaphore(r.PathValue("name"))
	}
	if v == nil {
		writeError(w, fmt.Errorf("%w: no semaphore %q", ErrNotFound, r.PathValue("name")))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) apiLimiter(w http.ResponseWriter, r *http.Request) {
	var v *LimiterView
	if s.limits != nil {
		v = s.limits.Limiter(r.PathValue("name"))
	}
	if v == nil {
		writeError(w, fmt.Errorf("%w: no rate limiter %q", ErrNotFound, r.PathValue("name")))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// Reservations is the Reservations page's list: every space in counts.
type Reservations struct {
	Spaces     []SpaceSummary `json:"spaces"`
	ServerTime time.Time      `json:"server_time"`
}

func (s *Server) apiReservations(w http.ResponseWriter, r *http.Request) {
	out := Reservations{Spaces: []SpaceSummary{}, ServerTime: s.model.ServerNow()}
	if s.spaces != nil {
		out.Spaces = s.spaces.Spaces()
	}
	writeJSON(w, http.StatusOK, out)
}

// apiSpace is one space, in the shape of `baton reserve ls SPACE --json`
// with the counts of its summary; 404 when it holds no reservation.
func (s *Server) apiSpace(w http.ResponseWriter, r *http.Request) {
	var v *SpaceView
	if s.spaces != nil {
		v = s.spaces.Space(r.PathValue("space"))
	}
	if v == nil {
		writeError(w, fmt.Errorf("%w: no reservation in space %q", ErrNotFound, r.PathValue("space")))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// apiDoctor is `baton doctor --json`, checked now.
func (s *Server) apiDoctor(w http.ResponseWriter, r *http.Request) {
	rep, err := s.checker().Run(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	s.setReport(rep)
	writeJSON(w, http.StatusOK, rep)
}

// writeJSON writes v with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// APIError is the body of every refused API call.
type APIError struct {
	Error string `json:"error"`
	// Code is the baton exit code the CLI gives the same error.
	Code int `json:"code"`
}

// writeError answers err with its HTTP status.
func writeError(w http.ResponseWriter, err error) {
	code, exit := statusOf(err)
	writeJSON(w, code, APIError{Error: err.Error(), Code: exit})
}

// statusOf maps an error to its HTTP status and the CLI's exit code
// (docs/CONTRACT.md): one place, as the CLI has one.
func statusOf(err error) (httpCode, exitCode int) {
	switch {
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized, 2
	case errors.Is(err, ErrReadOnly):
		return http.StatusForbidden, 2
	case errors.Is(err, ErrInvalid), errors.Is(err, session.ErrInvalid), errors.Is(err, lease.ErrInvalid),
		errors.Is(err, queue.ErrInvalid), errors.Is(err, kv.ErrInvalidKey), errors.Is(err, kv.ErrInvalidTTL):
		return http.StatusBadRequest, 2
	case errors.Is(err, ErrNotFound), errors.Is(err, queue.ErrQueueNotFound), errors.Is(err, queue.ErrTaskNotFound),
		errors.Is(err, lease.ErrNoLeader), errors.Is(err, lease.ErrNoCandidate), errors.Is(err, session.ErrNotFound),
		errors.Is(err, lease.ErrNotFound):
		return http.StatusNotFound, 5
	case errors.Is(err, session.ErrForeignHost):
		return http.StatusForbidden, 4
	case errors.Is(err, kv.ErrConflict), errors.Is(err, queue.ErrHeld), errors.Is(err, queue.ErrState),
		errors.Is(err, lease.ErrHeld), errors.Is(err, session.ErrHeld), errors.Is(err, lease.ErrNotEligible):
		return http.StatusConflict, 3
	case errors.Is(err, kv.ErrUnavailable), errors.Is(err, kv.ErrJetStreamDisabled), errors.Is(err, kv.ErrPermission),
		errors.Is(err, kv.ErrBucketNotFound):
		return http.StatusServiceUnavailable, 6
	}
	return http.StatusInternalServerError, 1
}
