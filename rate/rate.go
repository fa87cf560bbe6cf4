package rate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/internal/names"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/limits"
)

// DefaultPrefix names the bucket: <prefix>-limits.
const DefaultPrefix = "baton"

// BucketConfig is the limits bucket's configuration (package limits),
// shared with semaphores.
func BucketConfig(prefix string, replicas int) kv.BucketConfig {
	return limits.BucketConfig(prefix, replicas)
}

// Limiters creates, takes from and reads the rate limiters of one prefix.
// It is safe for concurrent use.
type Limiters struct {
	bucket *kv.Bucket
	prefix string
	now    func() time.Time
}

// Option configures New.
type Option func(*Limiters) error

// WithPrefix sets the bucket prefix. Default: DefaultPrefix.
func WithPrefix(p string) Option {
	return func(ls *Limiters) error {
		if !names.Plain(p, 64) {
			return fmt.Errorf("%w: prefix %q: use 1-64 letters, digits, '-' and '_'", ErrInvalid, p)
		}
		ls.prefix = p
		return nil
	}
}

// WithClock sets the clock of the informational times written into
// records. It decides nothing: admission goes by the server's time.
// Default: time.Now.
func WithClock(now func() time.Time) Option {
	return func(ls *Limiters) error { ls.now = now; return nil }
}

// New returns the rate limiters of c's server. It makes no round trip.
func New(c *kv.Client, opts ...Option) (*Limiters, error) {
	ls := &Limiters{prefix: DefaultPrefix, now: time.Now}
	for _, o := range opts {
		if err := o(ls); err != nil {
			return nil, err
		}
	}
	ls.bucket = c.Bucket(BucketConfig(ls.prefix, 0))
	return ls, nil
}

// Ensure creates the limits bucket with replicas servers holding it, or
// reports (kv.ErrBucketMismatch) how an existing one differs.
func (ls *Limiters) Ensure(ctx context.Context, replicas int) error {
	_, err := ls.bucket.Client().Ensure(ctx, BucketConfig(ls.prefix, replicas))
	return err
}

// Bucket is the limits bucket.
func (ls *Limiters) Bucket() *kv.Bucket { return ls.bucket }

// ValidName checks a limiter's name: 1-64 letters, digits, '-' and '_'.
func ValidName(name string) error {
	if !names.Plain(name, 64) {
		return fmt.Errorf("%w: limiter name %q: use 1-64 letters, digits, '-' and '_'", ErrInvalid, name)
	}
	return nil
}

// MaxLog bounds the takes a limiter's record holds (each is kept for the
// longest period): a limiter admits at most this many in its longest
// period, whatever its limits, so that a record stays small enough to
// rewrite at every take.
const MaxLog = 10000

func validLimits(ls []Limit) error {
	if len(ls) == 0 {
		return fmt.Errorf("%w: a limiter needs at least one limit (N/PERIOD)", ErrInvalid)
	}
	for _, l := range ls {
		switch {
		case l.Max < 1:
			return fmt.Errorf("%w: limit %d per %s: at least 1", ErrInvalid, l.Max, time.Duration(l.Period))
		case time.Duration(l.Period) < time.Millisecond || time.Duration(l.Period) > 24*time.Hour:
			return fmt.Errorf("%w: period %s: from 1ms to 24h", ErrInvalid, time.Duration(l.Period))
		case l.Burst < 0:
			return fmt.Errorf("%w: burst %d is negative", ErrInvalid, l.Burst)
		case l.Per != PerCost && l.Per != PerTake:
			return fmt.Errorf("%w: a limit counts %q or %q, not %q", ErrInvalid, PerCost, PerTake, l.Per)
		case l.Per == PerTake && l.Max+l.Burst > MaxLog:
			return fmt.Errorf("%w: %d takes per period: a limiter keeps at most %d", ErrInvalid, l.Max+l.Burst, MaxLog)
		}
	}
	return nil
}

// sameLimits compares limits as sets.
func sameLimits(a, b []Limit) bool {
	key := func(l Limit) string { return fmt.Sprintf("%d/%d/%d/%s", l.Max, l.Period, l.Burst, l.Per) }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i] = key(a[i])
	}
	for i := range b {
		kb[i] = key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// Create makes limiter name with limits. Creating one that exists with the
// same limits changes nothing; with others it is ErrExists: a limiter's
// limits never change, so that no caller counts against another's.
func (ls *Limiters) Create(ctx context.Context, name string, lim []Limit) (Limiter, error) {
	if err := ValidName(name); err != nil {
		return Limiter{}, err
	}
	if err := validLimits(lim); err != nil {
		return Limiter{}, err
	}
	rec := Limiter{Name: name, Limits: slices.Clone(lim), CreatedAt: ls.now().UTC()}
	data, err := rec.MarshalJSON()
	if err != nil {
		return Limiter{}, err
	}
	_, err = ls.bucket.Create(ctx, limiterKey(name), data, 0)
	var ce *kv.ConflictError
	switch {
	case err == nil:
		return rec, nil
	case errors.As(err, &ce) && ce.Current != nil:
		have, derr := decode(name, *ce.Current)
		if derr != nil {
			return Limiter{}, derr
		}
		if !sameLimits(have.Limits, lim) {
			return Limiter{}, fmt.Errorf("%w: %s has %s; a limiter's limits never change (choose another name)", ErrExists, name, Describe(have.Limits))
		}
		return have, nil
	default:
		return Limiter{}, err
	}
}

// Describe is limits as people write them: "50/1m0s per take, 40000/1m0s".
func Describe(lim []Limit) string {
	parts := make([]string, len(lim))
	for i, l := range lim {
		parts[i] = fmt.Sprintf("%d/%s", l.Max, time.Duration(l.Period))
		if l.Burst > 0 {
			parts[i] += fmt.Sprintf(" +%d burst", l.Burst)
		}
		if l.Per == PerTake {
			parts[i] += " takes"
		}
	}
	return strings.Join(parts, ", ")
}

func decode(name string, e kv.Entry) (Limiter, error) {
	var rec Limiter
	if err := rec.UnmarshalJSON(e.Value); err != nil {
		return rec, fmt.Errorf("%w: %s: %w", ErrUndecodable, e.Key, err)
	}
	if rec.Name != name || validLimits(rec.Limits) != nil {
		return rec, fmt.Errorf("%w: %s: names limiter %q with limits %v", ErrUndecodable, e.Key, rec.Name, rec.Limits)
	}
	return rec, nil
}

// get reads limiter name's record.
func (ls *Limiters) get(ctx context.Context, name string) (kv.Entry, error) {
	if err := ValidName(name); err != nil {
		return kv.Entry{}, err
	}
	e, err := ls.bucket.Get(ctx, limiterKey(name))
	if errors.Is(err, kv.ErrNotFound) {
		return e, fmt.Errorf("%w: %s: create it with baton rate create %s --limit N/PERIOD", ErrNotFound, name, name)
	}
	return e, err
}

// TakeOption configures a take.
type TakeOption func(*takeConfig) error

type takeConfig struct {
	cost int64
	id   string
}

// WithCost sets the take's cost (tokens, bytes: what the limits count).
// Default: 1.
func WithCost(c int64) TakeOption {
	return func(t *takeConfig) error {
		if c < 0 {
			return fmt.Errorf("%w: cost %d is negative", ErrInvalid, c)
		}
		t.cost = c
		return nil
	}
}

// WithID names the take, for Settle. Default: a fresh uuid.
func WithID(id string) TakeOption {
	return func(t *takeConfig) error {
		if id == "" || len(id) > 128 {
			return fmt.Errorf("%w: take id %q: 1-128 characters", ErrInvalid, id)
		}
		t.id = id
		return nil
	}
}

func takeOptions(opts []TakeOption) (takeConfig, error) {
	cfg := takeConfig{cost: 1}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	if cfg.id == "" {
		cfg.id = uuid.NewString()
	}
	return cfg, nil
}

// Admission is an admitted take.
type Admission struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	Cost int64  `json:"cost"`
	// Revision is the write that admitted it.
	Revision uint64 `json:"revision"`
}

// Take admits a take of limiter name if it fits every limit now, by the
// server's time: a read and one compare-and-set, more when others take at
// the same moment; a *LimitedError (ErrLimited) with RetryAfter when it
// does not fit. A process that takes often uses Open, which saves the
// read.
func (ls *Limiters) Take(ctx context.Context, name string, opts ...TakeOption) (*Admission, error) {
	a, err := ls.takeNow(ctx, name, opts)
	ls.noticeRefusal(err)
	return a, err
}

// noticeRefusal tells a refused take (err a *LimitedError) on the
// limiter's refusal subject (limits.RefusalSubject): a publish without a
// reply, which the connection sends with its next write or its close, so
// it costs the take no round trip.
func (ls *Limiters) noticeRefusal(err error) {
	var le *LimitedError
	if !errors.As(err, &le) {
		return
	}
	nc := ls.bucket.Client().Conn()
	if nc == nil {
		return
	}
	_ = nc.Publish(limits.RefusalSubject(ls.prefix, le.Name), strconv.AppendInt(nil, le.Cost, 10))
}

// takeNow is Take without the refusal notice.
func (ls *Limiters) takeNow(ctx context.Context, name string, opts []TakeOption) (*Admission, error) {
	cfg, err := takeOptions(opts)
	if err != nil {
		return nil, err
	}
	e, err := ls.get(ctx, name)
	if err != nil {
		return nil, err
	}
	a, _, err := ls.take(ctx, name, seen{e: e, exact: true}, time.Time{}, cfg)
	return a, err
}

// seen is a limiter's record as a taker knows it: read from the server
// (exact: e.Created is the server's time of its revision), or written by
// this taker, when e.Created is only an upper bound of that time (a
// Handle's own write: the server tells a writer no time).
type seen struct {
	e     kv.Entry
	exact bool
}

// take decides and writes a take from s, the record as last seen, at a
// decision time no later than its own write's server time: s's time if
// exact, lower (a lower bound of the server's time now, or zero), or the
// server's time read once a take does not fit. On a lost compare-and-set
// it goes on from the record in the way (read: exact). It returns the last
// record it knows: its own write, with no time, when admitted.
func (ls *Limiters) take(ctx context.Context, name string, s seen, lower time.Time, cfg takeConfig) (*Admission, seen, error) {
	var serverNow time.Time // read once a take does not fit: the record's time may be old
	lost := 0
	for {
		e := s.e
		rec, err := decode(name, e)
		if err != nil {
			return nil, s, err
		}
		if lost > 0 && rec.holds(cfg.id) {
			// A write of this call whose answer was lost landed before the
			// one in the way: the take is admitted already.
			return &Admission{Name: name, ID: cfg.id, Cost: cfg.cost, Revision: e.Revision}, s, nil
		}
		for _, l := range rec.Limits {
			if n := l.count(cfg.cost); n > l.Max+l.Burst {
				return nil, s, fmt.Errorf("%w: a take of cost %d never fits %s", ErrInvalid, cfg.cost, Describe([]Limit{l}))
			}
		}
		d := lower
		if s.exact && e.Created.After(d) {
			d = e.Created
		}
		if serverNow.After(d) {
			d = serverNow
		}
		ok, next, wait := decide(rec, e.Created, d, cfg.cost, cfg.id)
		if !ok {
			if serverNow.IsZero() {
				if serverNow, err = ls.bucket.ServerTime(ctx); err != nil {
					return nil, s, err
				}
				continue
			}
			return nil, s, &LimitedError{Name: name, Cost: cfg.cost, RetryAfter: wait}
		}
		data, err := next.MarshalJSON()
		if err != nil {
			return nil, s, err
		}
		rev, err := ls.bucket.Update(ctx, e.Key, data, 0, e.Revision)
		var ce *kv.ConflictError
		switch {
		case err == nil:
			return &Admission{Name: name, ID: cfg.id, Cost: cfg.cost, Revision: rev}, seen{e: kv.Entry{Key: e.Key, Value: data, Revision: rev}}, nil
		case errors.As(err, &ce) && ctx.Err() != nil:
			return nil, s, errors.Join(err, ctx.Err())
		case errors.As(err, &ce) && ce.Current != nil && ce.Current.Live():
			// Another take was written first: decide again from it (each
			// lost compare-and-set is another's admitted take), after a
			// random pause that grows with the losses, so that takers of a
			// hot limiter do not lose to each other in lockstep. It was
			// read: its time is exact.
			s = seen{e: *ce.Current, exact: true}
			lost++
			if err := backoff(ctx, lost); err != nil {
				return nil, s, err
			}
		default:
			return nil, s, err
		}
	}
}

// backoff sleeps a random time up to 100 us times 2^(lost-1), at most 5 ms.
func backoff(ctx context.Context, lost int) error {
	ceiling := min(100*time.Microsecond<<min(lost-1, 6), 5*time.Millisecond)
	t := time.NewTimer(rand.N(ceiling))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l Limit) count(cost int64) int64 {
	if l.Per == PerTake {
		return 1
	}
	return cost
}

// TakeWait is Take that waits while the take does not fit, until ctx is
// done, sleeping as long as each refusal's RetryAfter says. Only a take
// that gives up is told as refused: one that waited and was admitted was
// delayed, not refused.
func (ls *Limiters) TakeWait(ctx context.Context, name string, opts ...TakeOption) (*Admission, error) {
	return ls.wait(ctx, func() (*Admission, error) { return ls.takeNow(ctx, name, opts) })
}

// wait runs take until it is admitted, fails otherwise, or ctx is done.
func (ls *Limiters) wait(ctx context.Context, take func() (*Admission, error)) (*Admission, error) {
	for {
		a, err := take()
		var le *LimitedError
		if !errors.As(err, &le) {
			return a, err
		}
		t := time.NewTimer(le.RetryAfter)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			ls.noticeRefusal(err)
			return nil, errors.Join(err, ctx.Err())
		}
	}
}

// Settle sets the cost of admitted take id, once its real cost is known
// (the tokens a request used, where the take reserved an estimate). The
// take keeps its place in time; a lower cost frees room at once, a higher
// one counts against the windows it is in, which may then hold more than
// the limit: what a reservation cannot know. ErrNoTake if the take has
// left the record (older than the longest period).
func (ls *Limiters) Settle(ctx context.Context, name, id string, cost int64) error {
	if cost < 0 {
		return fmt.Errorf("%w: cost %d is negative", ErrInvalid, cost)
	}
	e, err := ls.get(ctx, name)
	if err != nil {
		return err
	}
	for {
		rec, err := decode(name, e)
		if err != nil {
			return err
		}
		// The last take moves to the log with its time, so that this
		// write's time is nobody's.
		if rec.Last != nil {
			last := *rec.Last
			last.At = e.Created
			rec.Log = append(slices.Clone(rec.Log), last)
			rec.Last = nil
		} else {
			rec.Log = slices.Clone(rec.Log)
		}
		i := slices.IndexFunc(rec.Log, func(t Take) bool { return t.ID == id })
		if i < 0 {
			return fmt.Errorf("%w: %s has no take %s in its record (it keeps takes for its longest period)", ErrNoTake, name, id)
		}
		rec.Log[i].Cost = cost
		data, err := rec.MarshalJSON()
		if err != nil {
			return err
		}
		_, err = ls.bucket.Update(ctx, e.Key, data, 0, e.Revision)
		var ce *kv.ConflictError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ce) && ctx.Err() != nil:
			return errors.Join(err, ctx.Err())
		case errors.As(err, &ce) && ce.Current != nil && ce.Current.Live():
			e = *ce.Current
		default:
			return err
		}
	}
}

// Use is one limit's use at a moment.
type Use struct {
	Limit
	Used int64 `json:"used"`
	// Left is what a take may still cost now (Max + Burst - Used).
	Left int64 `json:"left"`
}

// Status is a limiter at the server's time now.
type Status struct {
	Name       string    `json:"name"`
	CreatedAt  time.Time `json:"created_at"`
	ServerTime time.Time `json:"server_time"`
	Uses       []Use     `json:"limits"`
	// Takes are the takes still inside the longest period, oldest first.
	Takes []Take `json:"takes"`
}

// Status reads limiter name and its use now.
func (ls *Limiters) Status(ctx context.Context, name string) (Status, error) {
	e, err := ls.get(ctx, name)
	if err != nil {
		return Status{}, err
	}
	rec, err := decode(name, e)
	if err != nil {
		return Status{}, err
	}
	now, err := ls.bucket.ServerTime(ctx)
	if err != nil {
		return Status{}, err
	}
	return statusOf(rec, e.Created, now), nil
}

func statusOf(rec Limiter, recTime, now time.Time) Status {
	st := Status{Name: rec.Name, CreatedAt: rec.CreatedAt, ServerTime: now, Takes: slices.Clone(rec.Log)}
	if rec.Last != nil {
		last := *rec.Last
		last.At = recTime
		st.Takes = append(st.Takes, last)
	}
	if st.Takes == nil {
		st.Takes = []Take{}
	}
	for _, l := range rec.Limits {
		u := Use{Limit: l}
		for _, t := range st.Takes {
			if t.At.After(now.Add(-time.Duration(l.Period))) {
				u.Used += l.count(t.Cost)
			}
		}
		u.Left = max(l.Max+l.Burst-u.Used, 0)
		st.Uses = append(st.Uses, u)
	}
	return st
}

// List reads every limiter, sorted by name; a record that does not decode
// is left out and counted.
func (ls *Limiters) List(ctx context.Context) ([]Status, int, error) {
	es, err := ls.bucket.ListMatching(ctx, "rate.*")
	if err != nil {
		return nil, 0, err
	}
	now, err := ls.bucket.ServerTime(ctx)
	if err != nil {
		return nil, 0, err
	}
	var out []Status
	bad := 0
	for _, e := range es {
		name := strings.TrimPrefix(e.Key, "rate.")
		rec, err := decode(name, e)
		if err != nil {
			bad++
			continue
		}
		out = append(out, statusOf(rec, e.Created, now))
	}
	return out, bad, nil
}

// Duration is a time.Duration written as "10s".
type Duration = jsonrec.Duration

// Problem is a limiter's record that does not decode: every take of that
// limiter is refused until it is removed and the limiter made again.
type Problem struct {
	Key      string
	Revision uint64
	Err      error
}

// Inspect returns the limiters' records that do not decode.
func (ls *Limiters) Inspect(ctx context.Context) ([]Problem, error) {
	es, err := ls.bucket.Entries(ctx, "rate.*")
	if err != nil {
		return nil, err
	}
	var out []Problem
	for _, e := range es {
		if _, err := decode(strings.TrimPrefix(e.Key, "rate."), e); err != nil {
			out = append(out, Problem{Key: e.Key, Revision: e.Revision, Err: err})
		}
	}
	return out, nil
}

// DecodeEntry reads a limiter's record as a watch of the limits bucket
// delivers it (key rate.<name>).
func DecodeEntry(e kv.Entry) (Limiter, error) {
	name, ok := strings.CutPrefix(e.Key, "rate.")
	if !ok || ValidName(name) != nil {
		return Limiter{}, fmt.Errorf("%w: %s is not a limiter's record", ErrInvalid, e.Key)
	}
	return decode(name, e)
}

// StatusAt is the limiter's use at server time now, from its record as
// written at server time at (the revision's time, its Last take's).
func (l Limiter) StatusAt(at, now time.Time) Status { return statusOf(l, at, now) }
