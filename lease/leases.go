package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/names"
	"github.com/batonhq/baton/kv"
)

// DefaultPrefix names the bucket: <prefix>-leases.
const DefaultPrefix = "baton"

// DefaultTTL is a lease's TTL when none is given.
const DefaultTTL = 10 * time.Second

// MarkerTTL is how long a released or expired lease's tombstone stays.
const MarkerTTL = 5 * time.Minute

// BucketConfig is the expected configuration of the leases bucket: no
// bucket TTL (each lease carries its own), one revision per key, markers
// so watchers see expiries. Replicas 0 means "as it is" (see kv.BucketConfig).
func BucketConfig(prefix string, replicas int) kv.BucketConfig {
	return kv.BucketConfig{
		Name:        prefix + "-leases",
		Description: "baton leases and leader elections",
		MarkerTTL:   MarkerTTL,
		Replicas:    replicas,
	}
}

// Leases acquires and reads the leases of one prefix, as one instance of
// one host.
type Leases struct {
	bucket   *kv.Bucket
	prefix   string
	host     string
	instance string
	proc     hostlocal.Process
	now      func() time.Time
	renewed  func(key string, took time.Duration, err error)

	mu   sync.Mutex
	lost map[string]uint64 // key -> fence of the last lease of this process that was lost on it
}

// Option configures New.
type Option func(*Leases) error

// WithPrefix sets the bucket prefix. Default: DefaultPrefix.
func WithPrefix(p string) Option {
	return func(ls *Leases) error {
		if !names.Plain(p, 64) {
			return fmt.Errorf("%w: prefix %q: use 1-64 letters, digits, '-' and '_'", ErrInvalid, p)
		}
		ls.prefix = p
		return nil
	}
}

// WithHostID sets this host's id. Default: the hostname.
func WithHostID(id string) Option {
	return func(ls *Leases) error {
		h, err := hostlocal.HostID(id)
		if err != nil {
			return fmt.Errorf("%w: host id: %w", ErrInvalid, err)
		}
		ls.host = h
		return nil
	}
}

// WithInstance sets the instance id that holds leases: unique per process,
// never the hostname. Default: a fresh uuid.
func WithInstance(id string) Option {
	return func(ls *Leases) error {
		if err := kv.ValidateKey(id); err != nil {
			return fmt.Errorf("%w: instance id: %w", ErrInvalid, err)
		}
		ls.instance = id
		return nil
	}
}

// WithProcess sets the process recorded as the holder. Default: the
// calling process.
func WithProcess(p hostlocal.Process) Option {
	return func(ls *Leases) error { ls.proc = p; return nil }
}

// WithClock sets the clock of the informational times written into
// records. It decides nothing. Default: time.Now.
func WithClock(now func() time.Time) Option {
	return func(ls *Leases) error { ls.now = now; return nil }
}

// WithRenewHook sets a function told of every renewal a held lease's
// keepalive makes (leaders' and candidacies' among them) that came to an
// answer: the lease's key, how long the round trip took, and its error
// (nil when renewed). It runs on the keepalive's goroutine, so it must
// return quickly; it is how a process exports renewal latency and failures
// (the CLI's --metrics). Default: none.
func WithRenewHook(fn func(key string, took time.Duration, err error)) Option {
	return func(ls *Leases) error { ls.renewed = fn; return nil }
}

// New returns the leases of c's server. It makes no round trip.
func New(c *kv.Client, opts ...Option) (*Leases, error) {
	ls := &Leases{prefix: DefaultPrefix, now: time.Now}
	for _, o := range opts {
		if err := o(ls); err != nil {
			return nil, err
		}
	}
	if ls.host == "" {
		if err := WithHostID("")(ls); err != nil {
			return nil, err
		}
	}
	if ls.instance == "" {
		ls.instance = uuid.NewString()
	}
	if ls.proc.PID == 0 {
		if self, err := hostlocal.Self(); err == nil {
			ls.proc = self
		}
	}
	ls.bucket = c.Bucket(BucketConfig(ls.prefix, 0))
	return ls, nil
}

// Ensure creates the leases bucket with replicas servers holding it, or
// reports (kv.ErrBucketMismatch) how an existing one differs.
func (ls *Leases) Ensure(ctx context.Context, replicas int) error {
	_, err := ls.bucket.Client().Ensure(ctx, BucketConfig(ls.prefix, replicas))
	return err
}

// Instance is the instance id this Leases holds leases as.
func (ls *Leases) Instance() string { return ls.instance }

// Host is this host's id.
func (ls *Leases) Host() string { return ls.host }

// Bucket is the leases bucket.
func (ls *Leases) Bucket() *kv.Bucket { return ls.bucket }

func validKey(key string) error {
	if err := kv.ValidateKey(key); err != nil {
		return fmt.Errorf("%w: key: %w", ErrInvalid, err)
	}
	return nil
}

// Get returns the lease on key. A key without one is ErrNotFound; a record
// that does not decode is a *HeldError with ErrUndecodable.
func (ls *Leases) Get(ctx context.Context, key string) (*Info, error) {
	e, err := ls.bucket.Latest(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, err
	}
	if !e.Live() {
		return nil, fmt.Errorf("%w: %s (%s at %s)", ErrNotFound, key, e.Op, e.Created.UTC().Format(time.RFC3339))
	}
	return infoOf(e)
}

func infoOf(e kv.Entry) (*Info, error) {
	in, err := decode(e)
	if err != nil {
		return nil, &HeldError{Key: e.Key, Revision: e.Revision, Reason: ErrUndecodable, Decode: err}
	}
	return in, nil
}

// Undecodable is a key whose record does not decode.
type Undecodable struct {
	Key      string
	Revision uint64
	Written  time.Time
	TTL      time.Duration
	Err      error
}

// Listing is every lease of the bucket at one moment of the server.
type Listing struct {
	Leases      []*Info
	Undecodable []Undecodable
	ServerTime  time.Time
}

// List reads every lease (plain leases, leaders and candidacies) with one
// watch of the bucket, then the server's time.
func (ls *Leases) List(ctx context.Context) (*Listing, error) {
	return ls.list(ctx, "")
}

func (ls *Leases) list(ctx context.Context, pattern string) (*Listing, error) {
	// Decoding is most of a large listing's cost: it runs on all CPUs while
	// the listing arrives.
	entries, err := kv.ListDecoded(ctx, ls.bucket, pattern, decode)
	if err != nil {
		return nil, err
	}
	now, err := ls.bucket.ServerTime(ctx)
	if err != nil {
		return nil, err
	}
	// Entries come sorted by key, and a lease decodes only under its own
	// key: the leases are in key order.
	l := &Listing{ServerTime: now, Leases: make([]*Info, 0, len(entries))}
	for _, d := range entries {
		if d.Err == nil {
			l.Leases = append(l.Leases, d.Out)
		} else {
			e := d.Entry
			l.Undecodable = append(l.Undecodable, Undecodable{Key: e.Key, Revision: e.Revision, Written: e.Created, TTL: e.TTL, Err: d.Err})
		}
	}
	return l, nil
}

// Resume returns this instance's lease on key, without renewing it in the
// background: for a command line that renews or releases a lease another
// process of the same instance acquired. A key without a lease is
// ErrNotFound, one whose lease ended is a *LostError (ErrLost) while its
// tombstone lasts, one held by another instance a *HeldError (ErrHeld).
func (ls *Leases) Resume(ctx context.Context, key string) (*Lease, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	e, err := ls.bucket.Latest(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, err
	}
	if !e.Live() {
		lost := lostBy(key, 0, e)
		if note, derr := decode(e); derr == nil {
			lost.Fence = note.Fence
		}
		return nil, lost
	}
	in, err := infoOf(e)
	if err != nil {
		return nil, err
	}
	if in.Holder != ls.instance {
		return nil, &HeldError{Key: key, Holder: &in.Record, Revision: in.Revision, Reason: ErrHeld}
	}
	ttl := in.TTL
	if ttl == 0 {
		ttl = time.Duration(in.Record.TTL)
	}
	return ls.handle(in.Record, in.Revision, in.Fence, ttl, time.Now(), acquireConfig{}), nil
}

// Prefix is the bucket prefix.
func (ls *Leases) Prefix() string { return ls.prefix }

// Reap removes the lease on key at revision rev, with a CAS delete: a lease
// renewed since survives (kv.ErrConflict).
func (ls *Leases) Reap(ctx context.Context, key string, rev uint64) error {
	return ls.bucket.Delete(ctx, key, rev, nil)
}
