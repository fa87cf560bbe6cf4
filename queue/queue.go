package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/session"
)

// Queues reads and writes the queues of one prefix, as one host: their
// configs and tasks, and makes workers. It is safe for concurrent use.
type Queues struct {
	m       *session.Manager // key locks: sessions of this host, without pid files
	bucket  *kv.Bucket
	prefix  string
	proc    hostlocal.Process
	now     func() time.Time
	renewed func(key string, took time.Duration, err error)

	mu      sync.Mutex
	configs map[string]Config // queues known to exist, for Add's one round trip

	ends endWatches // AddWait's shared watches (endwatch.go)

	spaces *reserve.Spaces // the workers' path reservations (touches.go), made at first use
}

// Option configures New.
type Option func(*Queues) error

// WithClock sets the clock of the informational times written into
// records. It decides nothing. Default: time.Now.
func WithClock(now func() time.Time) Option {
	return func(qs *Queues) error { qs.now = now; return nil }
}

// WithProcess sets the process recorded as the holder of the key locks and
// capacity tokens this handle's workers take. Default: the calling process.
func WithProcess(p hostlocal.Process) Option {
	return func(qs *Queues) error {
		if p.PID <= 0 {
			return fmt.Errorf("%w: pid %d", ErrInvalid, p.PID)
		}
		qs.proc = p
		return nil
	}
}

// WithRenewHook sets a function told of every renewal of a running task's
// key lock (with its capacity token) that came to an answer: the slot, how
// long the round trip took, and its error (nil when renewed). It runs on
// the keepalive's goroutine, so it must return quickly; it is how a process
// exports renewal latency and failures (the CLI's --metrics). Default: none.
func WithRenewHook(fn func(key string, took time.Duration, err error)) Option {
	return func(qs *Queues) error { qs.renewed = fn; return nil }
}

// New returns the queues of m's server, prefix and host: key locks are
// sessions of m's bucket, taken as m's host and instance. It makes no round
// trip; a missing bucket shows up as kv.ErrBucketNotFound on first use (see
// Ensure).
func New(m *session.Manager, opts ...Option) (*Queues, error) {
	client := m.Bucket().Client()
	// The workers' sessions leave no pid files: a worker holds its
	// *session.Session, and a file per task would only cost a write.
	locks, err := session.NewManager(client,
		session.WithPrefix(m.Prefix()), session.WithHostID(m.Host()), session.WithInstance(m.Instance()),
		session.WithStateDir(m.StateDir()), session.WithPIDFiles(false))
	if err != nil {
		return nil, err
	}
	qs := &Queues{m: locks, prefix: m.Prefix(), now: time.Now, configs: map[string]Config{}}
	for _, o := range opts {
		if err := o(qs); err != nil {
			return nil, err
		}
	}
	if qs.proc.PID == 0 {
		if qs.proc, err = hostlocal.Self(); err != nil {
			return nil, err
		}
	}
	qs.bucket = client.Bucket(BucketConfig(qs.prefix, 0))
	return qs, nil
}

// DispatchElection is the agent key of the election among queue q's
// workers for its dispatcher (adr/0035), in the leases bucket.
func DispatchElection(q string) string { return "queue." + q }

// election is the election of queue q's dispatcher, with worker as the
// candidate and ttl as the term's TTL: a dispatcher that dies is replaced
// within it (at once on its own host).
func (qs *Queues) election(q, worker string, ttl time.Duration) (*lease.Election, error) {
	ls, err := lease.New(qs.bucket.Client(), lease.WithPrefix(qs.prefix), lease.WithHostID(qs.m.Host()),
		lease.WithInstance(worker), lease.WithProcess(qs.proc))
	if err != nil {
		return nil, err
	}
	return ls.Election(DispatchElection(q), lease.ElectTTL(ttl))
}

// Ensure creates the queues bucket, and the leases bucket its workers
// elect their dispatcher in, with replicas servers holding them, or
// reports (kv.ErrBucketMismatch) how an existing one differs. The key
// locks' sessions bucket is the session manager's (Sessions().Ensure).
func (qs *Queues) Ensure(ctx context.Context, replicas int) error {
	for _, cfg := range []kv.BucketConfig{BucketConfig(qs.prefix, replicas), lease.BucketConfig(qs.prefix, replicas)} {
		if _, err := qs.bucket.Client().Ensure(ctx, cfg); err != nil {
			return err
		}
	}
	return nil
}

// Bucket is the queues bucket.
func (qs *Queues) Bucket() *kv.Bucket { return qs.bucket }

// Sessions is the session manager the key locks are taken with.
func (qs *Queues) Sessions() *session.Manager { return qs.m }

// Host is this handle's host id.
func (qs *Queues) Host() string { return qs.m.Host() }

// Instance is this handle's instance id.
func (qs *Queues) Instance() string { return qs.m.Instance() }

// Create makes a queue with cfg (cfg.Queue names it; zero fields are not
// defaults: start from DefaultConfig). A queue that exists with the same
// settings is returned with created false; with other settings it is
// ErrQueueExists (change it with SetConfig).
func (qs *Queues) Create(ctx context.Context, cfg Config) (Config, bool, error) {
	if err := cfg.Validate(); err != nil {
		return Config{}, false, err
	}
	now := qs.now().UTC()
	cfg.CreatedAt, cfg.UpdatedAt = now, now
	data, err := cfg.MarshalJSON()
	if err != nil {
		return Config{}, false, err
	}
	rev, err := qs.bucket.Create(ctx, configKey(cfg.Queue), data, 0)
	var ce *kv.ConflictError
	switch {
	case err == nil:
		cfg.Revision = rev
		qs.remember(cfg)
		return cfg, true, nil
	case errors.As(err, &ce) && ce.Current != nil && ce.Current.Live():
		have, derr := decodeConfig(*ce.Current)
		if derr != nil {
			return Config{}, false, derr
		}
		qs.remember(have)
		if sameSettings(have, cfg) {
			return have, false, nil
		}
		return have, false, fmt.Errorf("%w: queue %s exists with other settings", ErrQueueExists, cfg.Queue)
	default:
		return Config{}, false, err
	}
}

// sameSettings compares what a config decides, not when it was written.
func sameSettings(a, b Config) bool {
	return a.MaxActive == b.MaxActive && a.PerKey == b.PerKey && a.MaxAttempts == b.MaxAttempts &&
		a.Timeout == b.Timeout && a.TTL == b.TTL && a.SlotPrefix == b.SlotPrefix &&
		a.Backoff == b.Backoff && a.Retention == b.Retention && a.Rate.equal(b.Rate) && a.KeyRate.equal(b.KeyRate)
}

func (qs *Queues) remember(c Config) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if old, ok := qs.configs[c.Queue]; !ok || old.Revision < c.Revision {
		qs.configs[c.Queue] = c
	}
}

// Config reads the queue's config: ErrQueueNotFound if it has none.
func (qs *Queues) Config(ctx context.Context, q string) (Config, error) {
	if err := ValidateName(q); err != nil {
		return Config{}, err
	}
	e, err := qs.bucket.Get(ctx, configKey(q))
	if errors.Is(err, kv.ErrNotFound) {
		return Config{}, fmt.Errorf("%w: %s", ErrQueueNotFound, q)
	}
	if err != nil {
		return Config{}, err
	}
	c, err := decodeConfig(e)
	if err != nil {
		return Config{}, err
	}
	qs.remember(c)
	return c, nil
}

// SetConfig changes the queue's config with fn, by a compare-and-set on the
// revision read (retried if another writer changed it meanwhile). The name
// and creation time cannot change. Workers apply the change as soon as
// their watch shows it: lowering max_active stops new tasks from starting
// until fewer run, it does not stop running ones.
func (qs *Queues) SetConfig(ctx context.Context, q string, fn func(*Config) error) (Config, error) {
	for attempt := 1; ; attempt++ {
		cur, err := qs.Config(ctx, q)
		if err != nil {
			return Config{}, err
		}
		next := cur
		next.unknown = maps.Clone(cur.unknown)
		if err := fn(&next); err != nil {
			return Config{}, err
		}
		next.Queue, next.CreatedAt = cur.Queue, cur.CreatedAt
		if err := next.Validate(); err != nil {
			return Config{}, err
		}
		next.UpdatedAt = qs.now().UTC()
		data, err := next.MarshalJSON()
		if err != nil {
			return Config{}, err
		}
		rev, err := qs.bucket.Update(ctx, configKey(q), data, 0, cur.Revision)
		if err == nil {
			next.Revision = rev
			qs.remember(next)
			return next, nil
		}
		if !errors.Is(err, kv.ErrConflict) || attempt == 4 {
			return Config{}, err
		}
	}
}

// List returns the config of every queue, sorted by name; configs that do
// not decode are returned as errors beside them.
func (qs *Queues) List(ctx context.Context) ([]Config, []error, error) {
	entries, err := qs.bucket.ListMatching(ctx, "*.config")
	if err != nil {
		return nil, nil, err
	}
	var out []Config
	var bad []error
	for _, e := range entries {
		c, err := decodeConfig(e)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, bad, nil
}

// AddOption configures Add.
type AddOption func(*addConfig) error

type addConfig struct {
	id       string
	priority Priority
	labels   map[string]string
	runAt    time.Time
	delay    time.Duration
	timeout  time.Duration
	attempts int
	unique   string
	debounce time.Duration
	after    []string
	space    string // touches.go
	touches  []string
}

// addOptions applies opts to the defaults.
func addOptions(opts []AddOption) (addConfig, error) {
	cfg := addConfig{priority: Normal}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return addConfig{}, err
		}
	}
	if cfg.unique != "" && cfg.id != "" {
		return addConfig{}, fmt.Errorf("%w: a unique task's id is its key's (<key>.u<n>): give no id with it", ErrInvalid)
	}
	return cfg, nil
}

// WithTimeout gives the task a timeout of its own, in place of the
// queue's: an attempt that runs longer is stopped and failed. Default:
// the queue's.
func WithTimeout(d time.Duration) AddOption {
	return func(c *addConfig) error {
		if d < time.Second {
			return fmt.Errorf("%w: timeout %s: use 1s or more (or leave it out for the queue's)", ErrInvalid, d)
		}
		c.timeout = d
		return nil
	}
}

// WithMaxAttempts gives the task a number of attempts of its own, in
// place of the queue's. Default: the queue's.
func WithMaxAttempts(n int) AddOption {
	return func(c *addConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: max attempts %d: use 1 or more", ErrInvalid, n)
		}
		c.attempts = n
		return nil
	}
}

// WithRunAt makes the task wait until t, by the server's clock (the
// clock of the leader of the queues bucket; never this host's), then take
// its fair turn. A time past makes no difference. Default: at once.
func WithRunAt(t time.Time) AddOption {
	return func(c *addConfig) error {
		if t.IsZero() {
			return fmt.Errorf("%w: run-at time: give a time (zero means none: leave the option out)", ErrInvalid)
		}
		c.runAt = t.UTC()
		return nil
	}
}

// WithDelay makes the task wait d after the server wrote it (by the
// server's clock, never this host's), then take its fair turn. Default: 0,
// at once.
func WithDelay(d time.Duration) AddOption {
	return func(c *addConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: delay %s: use 0 or a positive duration", ErrInvalid, d)
		}
		c.delay = d
		return nil
	}
}

// WithID gives the task an id (a key name: 1-128 characters of A-Z a-z
// 0-9 - _ = .). Adding an id the queue holds already adds nothing and
// returns that task. Default: a new uuid.
func WithID(id string) AddOption {
	return func(c *addConfig) error {
		if err := kv.ValidateKey(id); err != nil {
			return fmt.Errorf("%w: task id: %w", ErrInvalid, err)
		}
		c.id = id
		return nil
	}
}

// WithPriority sets the task's priority. Default: Normal.
func WithPriority(p Priority) AddOption {
	return func(c *addConfig) error {
		if p.rank() < 0 {
			return fmt.Errorf("%w: priority %q: use high, normal or low", ErrInvalid, p)
		}
		c.priority = p
		return nil
	}
}

// WithLabels attaches labels (reported by status, e.g. active by project):
// at most MaxLabels, keys 1-128 bytes, values up to 1024. Default: none.
func WithLabels(labels map[string]string) AddOption {
	return func(c *addConfig) error {
		if err := validLabels(labels); err != nil {
			return err
		}
		c.labels = maps.Clone(labels)
		return nil
	}
}

func validLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%w: %d labels: at most %d", ErrInvalid, len(labels), MaxLabels)
	}
	for k, v := range labels {
		if k == "" || len(k) > 128 || len(v) > 1024 {
			return fmt.Errorf("%w: label %q: keys are 1-128 bytes, values up to 1024", ErrInvalid, k)
		}
	}
	return nil
}

// ValidateKey checks a task key: a valid slot name once the queue's slot
// prefix (and a lane suffix) is put before it.
func ValidateKey(cfg Config, key string) error {
	if err := kv.ValidateKey(key); err != nil {
		return fmt.Errorf("%w: key: %w", ErrInvalid, err)
	}
	if err := kv.ValidateKey(cfg.Slot(key, cfg.PerKey-1)); err != nil {
		return fmt.Errorf("%w: key %q makes slot %q with the queue's slot prefix: %w", ErrInvalid, key, cfg.Slot(key, cfg.PerKey-1), err)
	}
	return nil
}

// Add puts a task for key into the queue with payload (opaque bytes, up to
// what the server accepts in one record) and returns it, with created false
// when a task with that id was there already (then nothing is written).
// It costs one round trip on a handle that has seen the queue (the first
// Add of a queue reads its config: an unknown queue is ErrQueueNotFound).
func (qs *Queues) Add(ctx context.Context, q, key string, payload []byte, opts ...AddOption) (*Task, bool, error) {
	qcfg, t, data, err := qs.prepare(ctx, q, key, payload, opts)
	if err != nil {
		return nil, false, err
	}
	if t.Unique != "" {
		return qs.addUnique(ctx, qcfg, t, opts)
	}
	rev, err := qs.bucket.Create(ctx, taskKey(q, t.ID), data, 0)
	return added(q, t, rev, err)
}

// prepare is what Add and AddWait do before they write: the queue's
// config (read once per handle), the task and its record, and the check
// that the tasks it waits for are there.
func (qs *Queues) prepare(ctx context.Context, q, key string, payload []byte, opts []AddOption) (Config, *Task, []byte, error) {
	if err := ValidateName(q); err != nil {
		return Config{}, nil, nil, err
	}
	qcfg, err := qs.known(ctx, q)
	if err != nil {
		return Config{}, nil, nil, err
	}
	t, data, err := qs.newTask(qcfg, key, payload, opts)
	if err != nil {
		return Config{}, nil, nil, err
	}
	if len(t.After) > 0 {
		if err := qs.checkAfter(ctx, q, t.After); err != nil {
			return Config{}, nil, nil, err
		}
	}
	return qcfg, t, data, nil
}

// newTask is the pending task Add writes, and its record.
func (qs *Queues) newTask(qcfg Config, key string, payload []byte, opts []AddOption) (*Task, []byte, error) {
	cfg, err := addOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	if err := ValidateKey(qcfg, key); err != nil {
		return nil, nil, err
	}
	if cfg.id == "" {
		cfg.id = uuid.NewString()
	}
	now := qs.now().UTC()
	t := &Task{
		ID: cfg.id, Queue: qcfg.Queue, Key: key, Priority: cfg.priority, Labels: cfg.labels, Payload: payload,
		State: StatePending, AddedAt: now, UpdatedAt: now, RunAt: cfg.runAt, Delay: Duration(cfg.delay),
		Timeout: Duration(cfg.timeout), MaxAttempts: cfg.attempts, Unique: cfg.unique, After: cfg.after,
		Touches: cfg.touches, Space: cfg.space,
	}
	data, err := encodeTask(t)
	if err != nil {
		return nil, nil, err
	}
	return t, data, nil
}

// added is Add's outcome of the create of t at rev (or err): t, written;
// or the task of that id the queue holds already.
func added(q string, t *Task, rev uint64, err error) (*Task, bool, error) {
	var ce *kv.ConflictError
	switch {
	case err == nil:
		t.Seq, t.Revision = rev, rev
		return t, true, nil
	case errors.As(err, &ce) && ce.Current != nil && ce.Current.Live():
		have, derr := decodeTask(q, *ce.Current)
		if derr != nil {
			return nil, false, fmt.Errorf("%w: task %s: %w", ErrUndecodable, t.ID, derr)
		}
		return have, false, nil
	default:
		return nil, false, err
	}
}

// known returns the queue's config, read once per handle.
func (qs *Queues) known(ctx context.Context, q string) (Config, error) {
	qs.mu.Lock()
	c, ok := qs.configs[q]
	qs.mu.Unlock()
	if ok {
		return c, nil
	}
	return qs.Config(ctx, q)
}

// Get reads a task. A queue without it is ErrTaskNotFound (ErrQueueNotFound
// when the queue itself does not exist); a record that does not decode is
// ErrUndecodable.
func (qs *Queues) Get(ctx context.Context, q, id string) (*Task, error) {
	if err := ValidateName(q); err != nil {
		return nil, err
	}
	if err := kv.ValidateKey(id); err != nil {
		return nil, fmt.Errorf("%w: task id: %w", ErrInvalid, err)
	}
	e, err := qs.bucket.Get(ctx, taskKey(q, id))
	if errors.Is(err, kv.ErrNotFound) {
		if _, cerr := qs.Config(ctx, q); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("%w: %s in queue %s", ErrTaskNotFound, id, q)
	}
	if err != nil {
		return nil, err
	}
	t, err := decodeTask(q, e)
	if err != nil {
		return nil, fmt.Errorf("%w: task %s: %w", ErrUndecodable, id, err)
	}
	return t, nil
}

// write rewrites t (a version read at t.Revision) with a compare-and-set,
// with the retention TTL when its state is final, and returns the new
// version.
func (qs *Queues) write(ctx context.Context, cfg Config, t *Task) (*Task, error) {
	t.UpdatedAt = qs.now().UTC()
	if t.Seq == 0 {
		t.Seq = t.Revision
	}
	var ttl time.Duration
	if t.State.Final() {
		ttl = time.Duration(cfg.Retention)
	}
	data, err := encodeTask(t)
	if err != nil {
		return nil, err
	}
	rev, err := qs.bucket.Update(ctx, taskKey(t.Queue, t.ID), data, ttl, t.Revision)
	if err != nil {
		return nil, err
	}
	out := t.clone()
	out.Revision, out.Written = rev, time.Time{}
	if out.Run != nil && out.Run.Claimed == 0 {
		out.Run.Claimed = rev
	}
	return out, nil
}
