package web

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/limits"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/sem"
)

// semEvery is how often a semaphore is read again at most while it
// changes: its permits renew and its waiters' tickets are kept alive, so
// a busy one changes all the time.
const semEvery = 250 * time.Millisecond

// limitsTracker keeps the semaphores and rate limiters of the limits
// bucket as the dashboard shows them, from one watch of their keys. A
// semaphore is read again (sem.Statuses: its record, units and lines) when
// the watch says it changed, at most every semEvery; a limiter is one
// record, which the watch brings whole. Takes admitted are counted from
// the records (each take id seen once), refusals from the notices takers
// send (limits.RefusalSubjects): both since the dashboard started.
type limitsTracker struct {
	ss       *sem.Semaphores // nil: no semaphores shown
	rl       *rate.Limiters  // nil: no limiters shown
	prefix   string
	onChange func(kind, key string)
	now      func() time.Time // the server's clock, as the model estimates it

	mu       sync.RWMutex
	sems     map[string]*semState
	limiters map[string]*limiterState
	synced   bool // the watch has delivered what was present
}

type semState struct {
	sts []sem.Status // nil until read; one per host for a per-host semaphore
	err string       // the last read's error
}

type limiterState struct {
	rev       uint64       // the record's revision as last seen (0: refusals seen, record not yet)
	rec       rate.Limiter // the record, decoded once per revision
	at        time.Time    // the revision's server time (its Last take's)
	err       string       // the record does not decode
	seen      map[string]struct{}
	wasInUse  bool // some limit counted a take at the last tick
	admitted  uint64
	admCost   int64
	refused   uint64
	refCost   int64
	refusedAt time.Time
}

func newLimitsTracker(ss *sem.Semaphores, rl *rate.Limiters, prefix string, now func() time.Time, onChange func(kind, key string)) *limitsTracker {
	return &limitsTracker{
		ss: ss, rl: rl, prefix: prefix, now: now, onChange: onChange,
		sems: map[string]*semState{}, limiters: map[string]*limiterState{},
	}
}

func (t *limitsTracker) bucket() *kv.Bucket {
	if t.ss != nil {
		return t.ss.Bucket()
	}
	return t.rl.Bucket()
}

// run follows the limits bucket and the refusal notices until ctx is done.
func (t *limitsTracker) run(ctx context.Context, onErr func(error)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	pace := newPacer(semEvery, func(ctx context.Context, name string) { t.readSem(ctx, name, onErr) })
	if t.ss != nil {
		wg.Go(func() { pace.run(ctx) })
	}
	if t.rl != nil {
		wg.Go(func() { t.tick(ctx) })
		if sub, err := t.bucket().Client().Conn().Subscribe(limits.RefusalSubjects(t.prefix), t.refusal); err == nil {
			defer func() { _ = sub.Unsubscribe() }()
		} else if onErr != nil {
			onErr(err)
		}
	}
	// The keys of what it shows only: the bucket holds the reservation
	// spaces too (resv.>, a record of up to a megabyte rewritten at each
	// change), which the spaces' own watch follows.
	var patterns []string
	if t.ss != nil {
		patterns = append(patterns, "sem.>")
	}
	if t.rl != nil {
		patterns = append(patterns, "rate.>")
	}
	watchLoop(ctx, onErr, func(ctx context.Context) error {
		w, err := t.bucket().WatchPatterns(ctx, patterns)
		if errors.Is(err, kv.ErrBucketNotFound) {
			return nil // no limits yet; looked at again after the pause
		}
		if err != nil {
			return err
		}
		defer w.Stop()
		t.reset(pace)
		for e := range w.Updates() {
			if e == nil {
				t.mu.Lock()
				t.synced = true
				t.mu.Unlock()
				continue
			}
			t.follow(*e, pace)
		}
		return nil
	})
}

// reset forgets the limiters' records (not their counts) and marks every
// semaphore to be read again, before a watch starts again.
func (t *limitsTracker) reset(pace *pacer) {
	t.mu.Lock()
	t.synced = false
	names := slices.Collect(maps.Keys(t.sems))
	t.mu.Unlock()
	for _, name := range names {
		pace.mark(name)
	}
}

// follow takes one entry of the bucket: a semaphore's record, unit or
// waiter ticket (sem.NAME, sem.NAME.I, sem.NAME.w.ID) marks it to be read
// again; a limiter's record (rate.NAME) is kept.
func (t *limitsTracker) follow(e kv.Entry, pace *pacer) {
	kind, rest, _ := strings.Cut(e.Key, ".")
	name, _, _ := strings.Cut(rest, ".")
	switch {
	case kind == "sem" && t.ss != nil && name != "":
		pace.mark(name)
	case kind == "rate" && t.rl != nil && name != "" && name == rest:
		t.keepLimiter(name, e)
	}
}

func (t *limitsTracker) keepLimiter(name string, e kv.Entry) {
	t.mu.Lock()
	l := t.limiters[name]
	if !e.Live() {
		delete(t.limiters, name)
		t.mu.Unlock()
		t.onChange(KindLimiter, name)
		t.onChange(KindOverview, "")
		return
	}
	isNew := l == nil || l.rev == 0
	if l == nil {
		l = &limiterState{}
		t.limiters[name] = l
	}
	// A write may have put it in use: the next tick sends it again, even
	// if its windows have emptied by then.
	l.rev, l.at, l.err, l.wasInUse = e.Revision, e.Created, "", true
	rec, err := rate.DecodeEntry(e)
	if err != nil {
		l.rec, l.err = rate.Limiter{}, err.Error()
	} else {
		l.rec = rec
		st := rec.StatusAt(e.Created, t.now())
		// Takes not seen before were admitted since; those present when
		// the watch began were admitted before the dashboard knew.
		seen := make(map[string]struct{}, len(st.Takes))
		for _, tk := range st.Takes {
			seen[tk.ID] = struct{}{}
			if _, old := l.seen[tk.ID]; !old && t.synced && l.seen != nil {
				l.admitted++
				l.admCost += tk.Cost
			}
		}
		l.seen = seen
	}
	t.mu.Unlock()
	t.onChange(KindLimiter, name)
	if isNew {
		t.onChange(KindOverview, "")
	}
}

// refusal counts one refusal notice.
func (t *limitsTracker) refusal(m *nats.Msg) {
	name := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	cost, err := strconv.ParseInt(string(m.Data), 10, 64)
	if err != nil || rate.ValidName(name) != nil {
		return
	}
	t.mu.Lock()
	l := t.limiters[name]
	if l == nil {
		l = &limiterState{}
		t.limiters[name] = l
	}
	l.refused++
	l.refCost += cost
	l.refusedAt = t.now()
	t.mu.Unlock()
	t.onChange(KindLimiter, name)
}

// tick sends the limiters whose windows are in use once a second: their
// use falls as time passes, with no write to say so.
func (t *limitsTracker) tick(ctx context.Context) {
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		now := t.now()
		var changed []string
		t.mu.Lock()
		for name, l := range t.limiters {
			if l.rev == 0 || l.err != "" {
				continue
			}
			inUse := false
			for _, u := range l.rec.StatusAt(l.at, now).Uses {
				inUse = inUse || u.Used > 0
			}
			if inUse || l.wasInUse {
				changed = append(changed, name)
			}
			l.wasInUse = inUse
		}
		t.mu.Unlock()
		for _, name := range changed {
			t.onChange(KindLimiter, name)
		}
	}
}

func (t *limitsTracker) readSem(ctx context.Context, name string, onErr func(error)) {
	sts, err := t.ss.Statuses(ctx, name)
	t.mu.Lock()
	_, known := t.sems[name]
	switch {
	case errors.Is(err, sem.ErrNotFound):
		delete(t.sems, name) // released units of a removed one, or not a semaphore
	case err != nil:
		if !known {
			t.sems[name] = &semState{}
		}
		t.sems[name].err = err.Error()
	default:
		t.sems[name] = &semState{sts: sts}
	}
	t.mu.Unlock()
	if err != nil && !errors.Is(err, sem.ErrNotFound) && onErr != nil && ctx.Err() == nil {
		onErr(err)
	}
	t.onChange(KindSemaphore, name)
	t.onChange(KindOverview, "")
}

// SemaphoreView is a semaphore as the dashboard shows it: `baton sem
// status NAME --json`, or why it could not be read. For a per-host
// semaphore, Hosts has each host's status (sem.Semaphores.Statuses), and
// the semaphore's own fields sum them (Held, Free) with no holders or
// waiters of their own.
type SemaphoreView struct {
	sem.Status
	Hosts []sem.Status `json:"hosts,omitempty"`
	Error string       `json:"error,omitempty"`
}

// LimiterView is a rate limiter as the dashboard shows it: each limit's use
// now, and what it admitted and refused since the dashboard started.
type LimiterView struct {
	Name      string     `json:"name"`
	CreatedAt time.Time  `json:"created_at,omitzero"`
	Limits    []LimitUse `json:"limits"`
	// Takes are the takes its record holds (those within its longest
	// period, and older ones until its next write).
	Takes      int       `json:"takes"`
	LastTakeAt time.Time `json:"last_take_at,omitzero"`
	// Admitted and AdmittedCost count the takes first seen in its record
	// since the dashboard started (cost as admitted, before any settle).
	Admitted     uint64 `json:"admitted"`
	AdmittedCost int64  `json:"admitted_cost"`
	// Refused and RefusedCost count the refusals takers told since the
	// dashboard started (a take that waited and was admitted is not one).
	Refused       uint64    `json:"refused"`
	RefusedCost   int64     `json:"refused_cost"`
	LastRefusedAt time.Time `json:"last_refused_at,omitzero"`
	// Undecodable says why its record does not decode: every take is
	// refused until it is removed (baton doctor names it).
	Undecodable string `json:"undecodable,omitempty"`
}

// LimitUse is one limit of a limiter and its use now.
type LimitUse struct {
	// Limit is the limit as `rate create` takes it: 50/1m, 40000/1m+5000.
	Limit    string `json:"limit"`
	Max      int64  `json:"max"`
	Burst    int64  `json:"burst,omitempty"`
	PeriodMS int64  `json:"period_ms"`
	Per      string `json:"per"`
	Used     int64  `json:"used"`
	Left     int64  `json:"left"`
}

// Semaphores lists the semaphores read, sorted by name.
func (t *limitsTracker) Semaphores() []SemaphoreView {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]SemaphoreView, 0, len(t.sems))
	for _, name := range slices.Sorted(maps.Keys(t.sems)) {
		out = append(out, t.semViewLocked(name))
	}
	return out
}

// Semaphore is one semaphore's view (nil: not known).
func (t *limitsTracker) Semaphore(name string) *SemaphoreView {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.sems[name] == nil {
		return nil
	}
	v := t.semViewLocked(name)
	return &v
}

func (t *limitsTracker) semViewLocked(name string) SemaphoreView {
	s := t.sems[name]
	switch {
	case len(s.sts) == 0:
		return SemaphoreView{Status: sem.Status{Name: name, Holders: []sem.Holder{}, Waiters: []sem.Waiter{}}, Error: s.err}
	case !s.sts[0].PerHost:
		return SemaphoreView{Status: s.sts[0], Error: s.err}
	}
	first := s.sts[0]
	v := SemaphoreView{Status: sem.Status{Name: name, Max: first.Max, PerHost: true, CreatedAt: first.CreatedAt,
		Holders: []sem.Holder{}, Waiters: []sem.Waiter{}}, Error: s.err}
	for _, st := range s.sts {
		if st.Host != "" {
			v.Hosts = append(v.Hosts, st)
			v.Held += st.Held
		}
	}
	return v
}

// Limiters lists the limiters whose records were seen, sorted by name.
func (t *limitsTracker) Limiters() []LimiterView {
	now := t.now()
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := []LimiterView{}
	for _, name := range slices.Sorted(maps.Keys(t.limiters)) {
		if v := t.limiterViewLocked(name, now); v != nil {
			out = append(out, *v)
		}
	}
	return out
}

// Limiter is one limiter's view (nil: its record was not seen).
func (t *limitsTracker) Limiter(name string) *LimiterView {
	now := t.now()
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.limiterViewLocked(name, now)
}

func (t *limitsTracker) limiterViewLocked(name string, now time.Time) *LimiterView {
	l := t.limiters[name]
	if l == nil || l.rev == 0 {
		return nil
	}
	v := &LimiterView{Name: name, Limits: []LimitUse{}, Admitted: l.admitted, AdmittedCost: l.admCost,
		Refused: l.refused, RefusedCost: l.refCost, LastRefusedAt: l.refusedAt, Undecodable: l.err}
	if l.err != "" {
		return v
	}
	st := l.rec.StatusAt(l.at, now)
	v.CreatedAt, v.Takes = st.CreatedAt, len(st.Takes)
	if n := len(st.Takes); n > 0 {
		v.LastTakeAt = st.Takes[n-1].At
	}
	for _, u := range st.Uses {
		v.Limits = append(v.Limits, LimitUse{Limit: rate.Describe([]rate.Limit{u.Limit}), Max: u.Max, Burst: u.Burst,
			PeriodMS: time.Duration(u.Period).Milliseconds(), Per: u.Per, Used: u.Used, Left: u.Left})
	}
	return v
}

// LimitsSummary is the limits in counts, for the overview.
type LimitsSummary struct {
	Semaphores int `json:"semaphores"`
	UnitsHeld  int `json:"units_held"`
	UnitsMax   int `json:"units_max"`
	Waiters    int `json:"waiters"`
	Limiters   int `json:"limiters"`
	// Refused counts refusals since the dashboard started.
	Refused uint64 `json:"refused"`
}

func (t *limitsTracker) Summary() LimitsSummary {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var s LimitsSummary
	for _, st := range t.sems {
		if len(st.sts) == 0 {
			continue
		}
		s.Semaphores++
		for _, h := range st.sts {
			s.UnitsHeld += h.Held
			s.Waiters += len(h.Waiters)
			if h.Host != "" || !h.PerHost {
				s.UnitsMax += h.Max // a per-host one counts each host that holds or waits
			}
		}
	}
	for _, l := range t.limiters {
		if l.rev != 0 {
			s.Limiters++
			s.Refused += l.refused
		}
	}
	return s
}
