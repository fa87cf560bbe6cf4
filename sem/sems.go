package sem

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/names"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/limits"
	"github.com/batonhq/baton/waitline"
)

// DefaultPrefix names the bucket: <prefix>-limits.
const DefaultPrefix = "baton"

// DefaultTTL is a permit's TTL when none is given.
const DefaultTTL = 30 * time.Second

// MarkerTTL is how long a released or expired unit's tombstone stays.
const MarkerTTL = limits.MarkerTTL

// MaxUnits bounds a semaphore's max: each unit is a record.
const MaxUnits = 1024

// BucketConfig is the expected configuration of the limits bucket,
// <prefix>-limits, which semaphores share with rate limiters
// (package limits).
func BucketConfig(prefix string, replicas int) kv.BucketConfig {
	return limits.BucketConfig(prefix, replicas)
}

// Semaphores creates, acquires and reads the semaphores of one prefix, as
// one host's process. It is safe for concurrent use.
type Semaphores struct {
	bucket *kv.Bucket
	prefix string
	host   string
	proc   hostlocal.Process
	now    func() time.Time

	mu sync.Mutex
	// configs are the semaphores read so far: a config never changes.
	configs map[string]Config
	// tombs are the tombstone revisions of units this handle freed or saw
	// freed, so that the next create of one costs one round trip.
	tombs map[string]uint64

	// claims are the first waiters' claims its holders may serve
	// (handoff.go).
	claims board
}

// Option configures New.
type Option func(*Semaphores) error

// WithPrefix sets the bucket prefix. Default: DefaultPrefix.
func WithPrefix(p string) Option {
	return func(s *Semaphores) error {
		if !names.Plain(p, 64) {
			return fmt.Errorf("%w: prefix %q: use 1-64 letters, digits, '-' and '_'", ErrInvalid, p)
		}
		s.prefix = p
		return nil
	}
}

// WithHostID sets this host's id. Default: the hostname.
func WithHostID(id string) Option {
	return func(s *Semaphores) error {
		h, err := hostlocal.HostID(id)
		if err != nil {
			return fmt.Errorf("%w: host id: %w", ErrInvalid, err)
		}
		s.host = h
		return nil
	}
}

// WithProcess sets the process recorded as the holder of permits: the one
// whose death frees them at once on this host. Default: the calling
// process.
func WithProcess(p hostlocal.Process) Option {
	return func(s *Semaphores) error { s.proc = p; return nil }
}

// WithClock sets the clock of the informational times written into
// records. It decides nothing. Default: time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Semaphores) error { s.now = now; return nil }
}

// New returns the semaphores of c's server. It makes no round trip.
func New(c *kv.Client, opts ...Option) (*Semaphores, error) {
	s := &Semaphores{prefix: DefaultPrefix, now: time.Now, configs: map[string]Config{}, tombs: map[string]uint64{}}
	s.claims.claims = map[string]heard{}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	if s.host == "" {
		if err := WithHostID("")(s); err != nil {
			return nil, err
		}
	}
	if s.proc.PID == 0 {
		if self, err := hostlocal.Self(); err == nil {
			s.proc = self
		}
	}
	s.bucket = c.Bucket(BucketConfig(s.prefix, 0))
	return s, nil
}

// Ensure creates the limits bucket with replicas servers holding it, or
// reports (kv.ErrBucketMismatch) how an existing one differs.
func (s *Semaphores) Ensure(ctx context.Context, replicas int) error {
	_, err := s.bucket.Client().Ensure(ctx, BucketConfig(s.prefix, replicas))
	return err
}

// Bucket is the limits bucket.
func (s *Semaphores) Bucket() *kv.Bucket { return s.bucket }

// Host is this handle's host id.
func (s *Semaphores) Host() string { return s.host }

// ValidName checks a semaphore's name: 1-64 letters, digits, '-' and '_'.
func ValidName(name string) error {
	if !names.Plain(name, 64) {
		return fmt.Errorf("%w: semaphore name %q: use 1-64 letters, digits, '-' and '_'", ErrInvalid, name)
	}
	return nil
}

// CreateOption configures Create.
type CreateOption func(*Config)

// PerHost makes a per-host semaphore: each host has max units of its own,
// for work bound by one machine (its cores, its memory, its disk), with
// every other guarantee of a semaphore of all hosts. Its record has max 0
// and max_per_host, so that a baton which predates per-host semaphores
// refuses it as undecodable instead of counting every host together.
func PerHost() CreateOption { return func(c *Config) { c.MaxPerHost, c.Max = c.Max, 0 } }

// Create makes semaphore name with max units. Creating one that exists
// with the same max (and scope) changes nothing (it returns the stored
// config); with another it is an *ExistsError: a semaphore's max never
// changes, so that no holder ever counted against another.
func (s *Semaphores) Create(ctx context.Context, name string, max int, opts ...CreateOption) (Config, error) {
	if err := ValidName(name); err != nil {
		return Config{}, err
	}
	if max < 1 || max > MaxUnits {
		return Config{}, fmt.Errorf("%w: max %d: a semaphore has 1 to %d units", ErrInvalid, max, MaxUnits)
	}
	c := Config{Name: name, Max: max, CreatedAt: s.now().UTC()}
	for _, o := range opts {
		o(&c)
	}
	data, err := c.MarshalJSON()
	if err != nil {
		return Config{}, err
	}
	_, err = s.bucket.Create(ctx, configKey(name), data, 0)
	var ce *kv.ConflictError
	switch {
	case err == nil:
		s.remember(c)
		return c, nil
	case errors.As(err, &ce) && ce.Current != nil:
		have, derr := decodeConfig(name, *ce.Current)
		if derr != nil {
			return Config{}, derr
		}
		if have.Max != c.Max || have.MaxPerHost != c.MaxPerHost {
			return Config{}, &ExistsError{Name: name, Max: have.Units(), PerHost: have.PerHost()}
		}
		s.remember(have)
		return have, nil
	default:
		return Config{}, err
	}
}

func (s *Semaphores) remember(c Config) {
	s.mu.Lock()
	s.configs[c.Name] = c
	s.mu.Unlock()
}

// Config reads semaphore name's record (once per handle: it never
// changes).
func (s *Semaphores) Config(ctx context.Context, name string) (Config, error) {
	if err := ValidName(name); err != nil {
		return Config{}, err
	}
	s.mu.Lock()
	c, ok := s.configs[name]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	e, err := s.bucket.Get(ctx, configKey(name))
	if errors.Is(err, kv.ErrNotFound) {
		return Config{}, fmt.Errorf("%w: %s: create it with baton sem create %s --max N", ErrNotFound, name, name)
	}
	if err != nil {
		return Config{}, err
	}
	if c, err = decodeConfig(name, e); err != nil {
		return Config{}, err
	}
	s.remember(c)
	return c, nil
}

// unitState is one unit as last seen: free (at a tombstone revision, 0 if
// never written or unknown) or held.
type unitState struct {
	unit int
	rev  uint64 // the live record's revision, or the tombstone's
	live bool
	ttl  time.Duration
	rec  *Unit // the live record, nil if it does not decode
	err  error // why rec is nil
}

// view is a semaphore as one listing shows it: its units (index i is unit
// i; units at or past max are ignored) and its waiters, first in line
// first.
type view struct {
	units   []unitState
	waiters []waitline.Waiter
}

// read lists semaphore c's units and line.
func (s *Semaphores) read(ctx context.Context, c Config) (view, error) {
	space := s.space(c)
	es, err := s.bucket.Entries(ctx, "sem."+space+".>")
	if err != nil {
		return view{}, err
	}
	return viewOf(c, space, es), nil
}

// space is where semaphore c's units and line are for this host.
func (s *Semaphores) space(c Config) string { return c.space(s.host) }

// viewOf is space of semaphore c as entries es show it (others ignored).
func viewOf(c Config, space string, es []kv.Entry) view {
	v := view{units: make([]unitState, c.Units()), waiters: waitline.Parse(lineName(space), es)}
	for i := range v.units {
		v.units[i].unit = i
	}
	for _, e := range es {
		if i, ok := unitOf(space, e.Key); ok && i < c.Units() {
			v.units[i] = stateOf(c.Name, i, e)
		}
	}
	return v
}

// lineName is the name of a space's line of waiters: tickets
// sem.<space>.w.<id>.
func lineName(space string) string { return "sem." + space + ".w" }

// line is semaphore c's line of waiters on this host's space, for this
// handle's process.
func (s *Semaphores) line(c Config) *waitline.Line {
	return waitline.New(s.bucket, lineName(s.space(c)), s.host, s.proc)
}

func stateOf(name string, i int, e kv.Entry) unitState {
	u := unitState{unit: i, rev: e.Revision, live: e.Live(), ttl: e.TTL}
	if u.live {
		if rec, err := decodeUnit(name, i, e); err != nil {
			u.err = err
		} else {
			u.rec = &rec
		}
	}
	return u
}

// unitOf is the unit number of key sem.<space>.<n>.
func unitOf(space, key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, "sem."+space+".")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// deadOnThisHost reports whether a unit's holder is a process of this host
// that is gone (its pid and start token, this boot), with its command's
// process group if it named one.
func (s *Semaphores) deadOnThisHost(u *Unit) bool {
	if u == nil || u.Host != s.host || u.PID <= 0 {
		return false
	}
	p := hostlocal.Process{PID: u.PID, Start: u.PIDStart}
	if !p.ThisBoot() || p.Alive() {
		return false
	}
	if u.ChildPID > 0 {
		c := hostlocal.Process{PID: u.ChildPID, Start: u.ChildPIDStart}
		if !c.ThisBoot() || c.Alive() || hostlocal.GroupRunning(u.ChildPID) {
			return false
		}
	}
	return true
}

func (s *Semaphores) tomb(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tombs[key]
}

func (s *Semaphores) setTomb(key string, rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev == 0 {
		delete(s.tombs, key)
		return
	}
	s.tombs[key] = rev
}

// newPermitID is a fresh permit id.
func newPermitID() string { return uuid.NewString() }
