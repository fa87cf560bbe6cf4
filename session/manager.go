package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/names"
	"github.com/batonhq/baton/kv"
)

// DefaultPrefix names the buckets: <prefix>-sessions.
const DefaultPrefix = "baton"

// MarkerTTL is how long a closed or expired session's tombstone stays
// visible (to watchers that connect late and to Resume, which can then say
// "expired" or "closed" rather than "not found").
const MarkerTTL = 5 * time.Minute

// ValidatePrefix checks a bucket prefix: 1-64 letters, digits, '-' or '_'.
func ValidatePrefix(p string) error {
	if !names.Plain(p, 64) {
		return fmt.Errorf("%w: prefix %q: use 1-64 letters, digits, '-' and '_'", ErrInvalid, p)
	}
	return nil
}

// BucketConfig is the expected configuration of the sessions bucket: no
// bucket TTL (each session carries its own), one revision per slot, markers
// so watchers see expiries.
func BucketConfig(prefix string, replicas int) kv.BucketConfig {
	return kv.BucketConfig{
		Name:        prefix + "-sessions",
		Description: "baton slot sessions",
		MarkerTTL:   MarkerTTL,
		Replicas:    replicas,
	}
}

// Manager reads and writes the sessions of one prefix, as one host.
type Manager struct {
	bucket   *kv.Bucket
	prefix   string
	host     string
	instance string
	state    *hostlocal.StateDir
	pidFiles bool
	now      func() time.Time
	renewed  func(key string, took time.Duration, err error)
}

// Option configures NewManager.
type Option func(*Manager) error

// WithPrefix sets the bucket prefix. Default: DefaultPrefix.
func WithPrefix(p string) Option {
	return func(m *Manager) error {
		if err := ValidatePrefix(p); err != nil {
			return err
		}
		m.prefix = p
		return nil
	}
}

// WithHostID sets this host's id. Default: hostlocal.HostID("") (the
// hostname).
func WithHostID(id string) Option {
	return func(m *Manager) error {
		h, err := hostlocal.HostID(id)
		if err != nil {
			return fmt.Errorf("%w: host id: %w", ErrInvalid, err)
		}
		m.host = h
		return nil
	}
}

// WithInstance sets the instance id written into new sessions. Default: a
// fresh uuid per Manager.
func WithInstance(id string) Option {
	return func(m *Manager) error {
		if id == "" {
			return fmt.Errorf("%w: empty instance id", ErrInvalid)
		}
		m.instance = id
		return nil
	}
}

// WithStateDir sets the host-local state directory that holds the join
// gates and pid files. Default: hostlocal.DefaultStateDir().
func WithStateDir(d *hostlocal.StateDir) Option {
	return func(m *Manager) error { m.state = d; return nil }
}

// WithPIDFiles makes Join leave a pid file per session under
// <state-dir>/pids/<prefix>/slot-SLOT.pid, which Close removes, and every
// commit of the session (CommitSlot's, a keeper's renewal) rewrite it with
// the revision, TTL and record it wrote: CommitSlot and CloseSlot of
// another process of this host then write on that revision without a read.
// Other processes (the CLI's commit and close, doctor) read the files to
// tell a session that was lost from one never joined, and doctor reports
// those a session outlived. Each write is a small file written and renamed
// into place. Default: off: a program that holds its *Session needs none,
// and creating a file can cost more than the join's round trip. The baton
// CLI turns it on.
func WithPIDFiles(on bool) Option {
	return func(m *Manager) error { m.pidFiles = on; return nil }
}

// WithClock sets the clock of the informational timestamps written into
// records (started_at, renewed_at). It decides nothing. Default: time.Now.
func WithClock(now func() time.Time) Option {
	return func(m *Manager) error { m.now = now; return nil }
}

// WithRenewHook sets a function told of every renewal Run's keepalive
// makes that came to an answer: the slot, how long the round trip took, and its
// error (nil when renewed). It runs on the keepalive's goroutine, so it must
// return quickly; it is how a process exports renewal latency and failures
// (the CLI's --metrics). Default: none.
func WithRenewHook(fn func(key string, took time.Duration, err error)) Option {
	return func(m *Manager) error { m.renewed = fn; return nil }
}

// NewManager returns a manager of the sessions of c's server. It makes no
// round trip: a missing bucket shows up as kv.ErrBucketNotFound on first
// use (see Ensure).
func NewManager(c *kv.Client, opts ...Option) (*Manager, error) {
	m := &Manager{prefix: DefaultPrefix, now: time.Now}
	for _, o := range opts {
		if err := o(m); err != nil {
			return nil, err
		}
	}
	if m.host == "" {
		if err := WithHostID("")(m); err != nil {
			return nil, err
		}
	}
	if m.instance == "" {
		m.instance = uuid.NewString()
	}
	if m.state == nil {
		dir, err := hostlocal.DefaultStateDir()
		if err != nil {
			return nil, err
		}
		if m.state, err = hostlocal.OpenStateDir(dir); err != nil {
			return nil, err
		}
	}
	m.bucket = c.Bucket(BucketConfig(m.prefix, 0))
	return m, nil
}

// Ensure creates the sessions bucket with replicas servers holding it, or
// reports (kv.ErrBucketMismatch) how an existing one differs.
func (m *Manager) Ensure(ctx context.Context, replicas int) error {
	_, err := m.bucket.Client().Ensure(ctx, BucketConfig(m.prefix, replicas))
	return err
}

// Host is this manager's host id.
func (m *Manager) Host() string { return m.host }

// Instance is this manager's instance id.
func (m *Manager) Instance() string { return m.instance }

// Prefix is the bucket prefix.
func (m *Manager) Prefix() string { return m.prefix }

// Bucket is the sessions bucket.
func (m *Manager) Bucket() *kv.Bucket { return m.bucket }

// StateDir is the host-local state directory.
func (m *Manager) StateDir() *hostlocal.StateDir { return m.state }

func validSlot(slot string) error {
	if err := kv.ValidateKey(slot); err != nil {
		return fmt.Errorf("%w: slot: %w", ErrInvalid, err)
	}
	return nil
}

// Get returns the slot's live session. A slot without one is ErrNotFound (or
// ErrLost via Resume); a record that does not decode is a *HeldError with
// ErrUndecodable.
func (m *Manager) Get(ctx context.Context, slot string) (*Session, error) {
	if err := validSlot(slot); err != nil {
		return nil, err
	}
	e, err := m.bucket.Latest(ctx, slot)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("%w: slot %s", ErrNotFound, slot)
	}
	if err != nil {
		return nil, err
	}
	if !e.Live() {
		return nil, fmt.Errorf("%w: slot %s (%s at %s)", ErrNotFound, slot, pastOp(e.Op), e.Created.Format(time.RFC3339))
	}
	return sessionOf(e)
}

// FromEntry decodes a live entry of the sessions bucket (as a watch of
// Bucket delivers it) into a session. A record that does not decode is a
// *HeldError with ErrUndecodable: held by nobody-knows-who.
func FromEntry(e kv.Entry) (*Session, error) { return sessionOf(e) }

// sessionOf decodes a live entry, failing closed on garbage.
func sessionOf(e kv.Entry) (*Session, error) {
	s, err := Decode(e)
	if err != nil {
		return nil, &HeldError{Slot: e.Key, Revision: e.Revision, Reason: ErrUndecodable, Decode: err}
	}
	return s, nil
}

func pastOp(op kv.Op) string {
	if op == kv.OpExpire {
		return LostExpired
	}
	return LostClosed
}

// Create writes a new session record with a CAS create; it does not take
// the host gate or check hosts (Join does). The returned session's fence is
// its revision.
func (m *Manager) Create(ctx context.Context, r Record, ttl time.Duration) (*Session, error) {
	return m.CreateAfter(ctx, r, ttl, 0)
}

// CreateAfter is Create for a slot the caller saw closed or expired at
// revision last (in a watch of Bucket): one round trip where Create over a
// tombstone costs three, while last is still the slot's last revision (see
// kv.Bucket.CreateAfter). last 0 is Create.
func (m *Manager) CreateAfter(ctx context.Context, r Record, ttl time.Duration, last uint64) (*Session, error) {
	if err := validSlot(r.Slot); err != nil {
		return nil, err
	}
	r.Fence = 0
	data, err := encodeRecord(r)
	if err != nil {
		return nil, err
	}
	rev, err := m.bucket.CreateAfter(ctx, r.Slot, data, ttl, last)
	if err != nil {
		return nil, err
	}
	r.Fence = rev
	return &Session{Record: r, Revision: rev, TTL: ttl}, nil
}

// Update rewrites s's record with a CAS on s.Revision, restarting its TTL,
// and returns the new version. It does not check hosts or fences (Commit
// does); a lost CAS is kv.ErrConflict.
func (m *Manager) Update(ctx context.Context, s *Session) (*Session, error) {
	data, err := encodeRecord(s.Record)
	if err != nil {
		return nil, err
	}
	rev, err := m.bucket.Update(ctx, s.Slot, data, s.TTL, s.Revision)
	if err != nil {
		return nil, err
	}
	return &Session{Record: s.Record.clone(), Revision: rev, TTL: s.TTL}, nil
}

// Delete removes the slot's record with a CAS on rev, leaving note (a
// closing record) in its tombstone. A lost CAS is kv.ErrConflict.
func (m *Manager) Delete(ctx context.Context, slot string, rev uint64, note *Record) error {
	_, err := m.DeleteRevision(ctx, slot, rev, note)
	return err
}

// DeleteRevision is Delete that returns the tombstone's revision (see
// CreateAfter).
func (m *Manager) DeleteRevision(ctx context.Context, slot string, rev uint64, note *Record) (uint64, error) {
	if err := validSlot(slot); err != nil {
		return 0, err
	}
	var data []byte
	if note != nil {
		var err error
		if data, err = encodeRecord(*note); err != nil {
			return 0, err
		}
	}
	return m.bucket.DeleteRevision(ctx, slot, rev, data)
}
