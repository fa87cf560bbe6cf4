package kv

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// watchHeartbeat is how often an idle watch hears from the server.
const watchHeartbeat = time.Second

// Watcher streams the changes of a bucket's keys in revision order.
type Watcher struct {
	updates chan *Entry
	sub     *nats.Subscription
	stop    chan struct{} // closed by Stop
	closed  chan struct{} // closed when the subscription has ended
	cancel  context.CancelFunc
	once    sync.Once
	endOnce sync.Once // closes closed and updates

	mu          sync.Mutex
	ended       bool // updates is closed: nothing more is sent
	initDone    bool
	initPending uint64
	received    uint64
}

// WatchOption configures Watch.
type WatchOption func(*watchConfig)

type watchConfig struct {
	updatesOnly bool
}

// UpdatesOnly skips the keys' current values: only later changes are
// delivered, and no end-of-initial-values marker is sent. Default: current
// values first.
func UpdatesOnly() WatchOption { return func(c *watchConfig) { c.updatesOnly = true } }

// Watch delivers the latest revision of every key matching pattern (a key,
// or a pattern with NATS wildcards '*' and '>'; "" means every key),
// including tombstones and expiry markers, then a nil entry marking the end
// of the current values, then every change as it happens. The channel is
// closed when ctx is done, Stop is called or the subscription ends. A reader
// that falls behind slows delivery rather than losing entries.
func (b *Bucket) Watch(ctx context.Context, pattern string, opts ...WatchOption) (*Watcher, error) {
	var cfg watchConfig
	for _, o := range opts {
		o(&cfg)
	}
	if pattern == "" {
		pattern = ">"
	}
	// The subscription's own context: nats.go keeps a goroutine on it until
	// it is done, so it ends with the watch, not only with the caller's ctx.
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	// Creating the consumer fails at once if the server refuses it (or the
	// reply inbox), rather than when the request times out.
	unregister := b.c.refusals.register(apiPrefix+"CONSUMER.CREATE."+b.stream+".", true, cancelCause)
	w := &Watcher{
		updates: make(chan *Entry, 256),
		stop:    make(chan struct{}),
		closed:  make(chan struct{}),
		cancel:  cancel,
	}
	handler := func(m *nats.Msg) {
		meta, err := m.Metadata()
		if err != nil {
			return
		}
		e := b.entryOf(m.Subject, meta.Sequence.Stream, meta.Timestamp, m.Header, m.Data)
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.send(&e) {
			return
		}
		if !w.initDone {
			w.received++
			if w.received >= w.initPending || meta.NumPending == 0 {
				w.initDone = true
				w.send(nil)
			}
		}
	}
	// A heartbeat every second lets the ordered consumer notice within a
	// few seconds that the server lost it (a restart) and recreate it from
	// the last revision seen; nothing is skipped.
	subOpts := []nats.SubOpt{nats.BindStream(b.stream), nats.OrderedConsumer(), nats.IdleHeartbeat(watchHeartbeat), nats.Context(ctx)}
	if cfg.updatesOnly {
		subOpts = append(subOpts, nats.DeliverNew())
	} else {
		subOpts = append(subOpts, nats.DeliverLastPerSubject())
	}
	// Hold the lock until the initial state is known, so the handler cannot
	// run ahead of it.
	w.mu.Lock()
	defer w.mu.Unlock()
	sub, err := b.c.pushJS.Subscribe(b.prefix+pattern, handler, subOpts...)
	unregister()
	if err != nil {
		err = b.c.watchError(ctx, b, refusal(ctx, err))
		cancel()
		return nil, err
	}
	w.sub = sub
	// The subscription's end closes Updates, under mu: every send holds mu
	// (the handler's, and Watch's own end of the initial values), and none
	// is made once it is closed, however late nats.go calls the handler.
	end := func() {
		w.endOnce.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.ended = true
			close(w.closed)
			close(w.updates)
			cancel()
		})
	}
	sub.SetClosedHandler(func(string) { go end() })
	if cfg.updatesOnly {
		w.initDone = true
	} else if pending, err := sub.InitialConsumerPending(); err == nil {
		if pending == 0 {
			w.initDone = true
			w.send(nil)
		} else {
			w.initPending = pending
		}
	}
	if !sub.IsValid() {
		// Closed before its closed handler was set (ctx was done at once).
		go end()
	}
	go func() {
		select {
		case <-ctx.Done():
			w.Stop()
		case <-w.stop:
		case <-w.closed:
		}
	}()
	return w, nil
}

// send delivers e unless the watcher is stopping or ended. The caller
// holds w.mu.
func (w *Watcher) send(e *Entry) bool {
	if w.ended {
		return false
	}
	select {
	case w.updates <- e:
		return true
	case <-w.stop:
		return false
	}
}

// Updates is the stream of entries; nil marks the end of the initial values.
func (w *Watcher) Updates() <-chan *Entry { return w.updates }

// Stop ends the watch; Updates is closed soon after. It is idempotent.
//
// Stop returns at once: a holder that must stop its work because it lost
// its lease is never held up by its own watch. The subscription ends with
// its context, in nats.go's own goroutine, which also deletes the watch's
// consumer on the server: a request that waits for its answer (seconds, on
// a link that went dead) until it comes, times out or the connection is
// closed.
func (w *Watcher) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.cancel()
	})
}

func (c *Client) watchError(ctx context.Context, b *Bucket, err error) error {
	if errors.Is(err, nats.ErrStreamNotFound) {
		return fmt.Errorf("%w: watch %s on %s: %w", ErrBucketNotFound, b.cfg.Name, c.url, err)
	}
	if errors.Is(err, nats.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrNoResponders) {
		// Tell a missing bucket from JetStream being off.
		if _, ierr := c.streamInfo(ctx, b.stream); ierr != nil {
			return ierr
		}
	}
	return c.requestError("watch "+b.cfg.Name, err)
}

// List returns every key's live entry, sorted by key, read with one watch of
// the bucket (not one read per key).
func (b *Bucket) List(ctx context.Context) ([]Entry, error) { return b.ListMatching(ctx, "") }

// ListMatching is List of the keys matching pattern (see Watch).
func (b *Bucket) ListMatching(ctx context.Context, pattern string) ([]Entry, error) {
	out, err := b.Entries(ctx, pattern)
	if err == nil {
		slices.SortFunc(out, func(x, y Entry) int { return strings.Compare(x.Key, y.Key) })
	}
	return out, err
}

// Decoded is a live entry of a listing and what its decode made of it.
type Decoded[T any] struct {
	Entry Entry
	Out   T
	Err   error
}

// listBatch is how many entries a listing hands a decoding goroutine at once.
const listBatch = 256

// ListDecoded is ListMatching with decode applied to every live entry while
// the rest are still arriving: batches of entries are decoded on up to
// GOMAXPROCS goroutines as the watch delivers, so that a large listing
// costs little more than its transfer. decode is called once per entry,
// from several goroutines at once. The result is in key order; its
// entries' Value is nil (decode saw it; Out is what is kept).
func ListDecoded[T any](ctx context.Context, b *Bucket, pattern string, decode func(Entry) (T, error)) ([]Decoded[T], error) {
	ctx, cancel := b.c.callCtx(ctx)
	defer cancel()
	w, err := b.Watch(ctx, pattern)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var (
		mu      sync.Mutex
		decoded [][]Decoded[T]
		wg      sync.WaitGroup
	)
	work := make(chan []Decoded[T], runtime.GOMAXPROCS(0))
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for batch := range work {
				for i := range batch {
					batch[i].Out, batch[i].Err = decode(batch[i].Entry)
					// What decode made of it is kept, not the bytes too:
					// 100k records would otherwise be held twice.
					batch[i].Entry.Value = nil
				}
				mu.Lock()
				decoded = append(decoded, batch)
				mu.Unlock()
			}
		})
	}
	finish := func() {
		close(work)
		wg.Wait()
	}
	cur := make([]Decoded[T], 0, listBatch)
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				finish()
				return nil, fmt.Errorf("%w: list %s on %s: the watch ended early", ErrUnavailable, b.cfg.Name, b.c.url)
			}
			if e == nil {
				work <- cur
				finish()
				n := 0
				for _, batch := range decoded {
					n += len(batch)
				}
				out := make([]Decoded[T], 0, n)
				for _, batch := range decoded {
					out = append(out, batch...)
				}
				slices.SortFunc(out, func(x, y Decoded[T]) int { return strings.Compare(x.Entry.Key, y.Entry.Key) })
				return out, nil
			}
			if !e.Live() {
				continue
			}
			cur = append(cur, Decoded[T]{Entry: *e})
			if len(cur) == listBatch {
				work <- cur
				cur = make([]Decoded[T], 0, listBatch)
			}
		case <-ctx.Done():
			finish()
			return nil, b.c.requestError("list "+b.cfg.Name, ctx.Err())
		}
	}
}

// Entries is ListMatching in the order the stream holds the entries
// (their revisions), unsorted: for readers that sum up rather than print.
func (b *Bucket) Entries(ctx context.Context, pattern string) ([]Entry, error) {
	ctx, cancel := b.c.callCtx(ctx)
	defer cancel()
	w, err := b.Watch(ctx, pattern)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var out []Entry
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("%w: list %s on %s: the watch ended early", ErrUnavailable, b.cfg.Name, b.c.url)
			}
			if e == nil {
				return out, nil
			}
			if e.Live() {
				out = append(out, *e)
			}
		case <-ctx.Done():
			return nil, b.c.requestError("list "+b.cfg.Name, ctx.Err())
		}
	}
}

// ServerTime is the stream leader's clock, read with one round trip. Client
// clocks decide nothing in baton; this is for ages, time left and measuring
// skew.
func (b *Bucket) ServerTime(ctx context.Context) (time.Time, error) {
	info, err := b.c.streamInfo(ctx, b.stream)
	if err != nil {
		return time.Time{}, err
	}
	return info.TimeStamp.UTC(), nil
}

// Head is the bucket's last revision (the highest revision any key has
// had, including deletes and expiries) and the stream leader's clock, read
// with one round trip. A watch started after Head has delivered, once its
// initial values are in, every revision up to it that is still a key's
// latest.
func (b *Bucket) Head(ctx context.Context) (uint64, time.Time, error) {
	info, err := b.c.streamInfo(ctx, b.stream)
	if err != nil {
		return 0, time.Time{}, err
	}
	return info.State.LastSeq, info.TimeStamp.UTC(), nil
}

// WatchEvents runs a watch of the keys matching pattern and turns each
// entry into an event with classify (which is told whether the current
// values have all been seen, and may drop an entry by returning false),
// sending synced once they have. The channel is closed when ctx is done or
// the watch ends; a slow reader slows the watch, nothing is dropped.
func WatchEvents[E any](ctx context.Context, b *Bucket, pattern string, synced E, classify func(e Entry, synced bool) (E, bool)) (<-chan E, error) {
	w, err := b.Watch(ctx, pattern)
	if err != nil {
		return nil, err
	}
	out := make(chan E, 64)
	go func() {
		defer close(out)
		defer w.Stop()
		send := func(ev E) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		done := false
		for e := range w.Updates() {
			if e == nil {
				done = true
				if !send(synced) {
					return
				}
				continue
			}
			if ev, ok := classify(*e, done); ok && !send(ev) {
				return
			}
		}
	}()
	return out, nil
}
