package kv

import (
	"context"
	"errors"
	"fmt"
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
	return b.WatchPatterns(ctx, []string{pattern}, opts...)
}

// WatchPatterns is Watch of the keys that match any of patterns (each as
// Watch's; none overlapping another), in one watch: the server sends only
// those keys' changes, where a watch of a broader pattern sends every key
// under it for the client to drop.
func (b *Bucket) WatchPatterns(ctx context.Context, patterns []string, opts ...WatchOption) (*Watcher, error) {
	if len(patterns) == 0 {
		return nil, fmt.Errorf("%w: a watch of no key pattern", ErrInvalidKey)
	}
	var cfg watchConfig
	for _, o := range opts {
		o(&cfg)
	}
	// The subscription's own context: nats.go keeps a goroutine on it until
	// it is done, so it ends with the watch, not only with the caller's ctx.
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	w := &Watcher{
		updates: make(chan *Entry, 256),
		stop:    make(chan struct{}),
		closed:  make(chan struct{}),
		cancel:  cancel,
	}
	handler := func(m *nats.Msg) {
		e, pending, ok := b.entryOfMsg(m, nil)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.send(&e) {
			return
		}
		if !w.initDone {
			w.received++
			if w.received >= w.initPending || pending == 0 {
				w.initDone = true
				w.send(nil)
			}
		}
	}
	// Hold the lock until the initial state is known, so the handler cannot
	// run ahead of it.
	w.mu.Lock()
	defer w.mu.Unlock()
	sub, err := b.subscribe(ctx, cancelCause, patterns, cfg.updatesOnly, handler)
	if err != nil {
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

// subscribe starts the ordered consumer of a watch or listing of the keys
// matching pattern ("" is every key) on ctx, whose cancel ends it: the
// latest revision of each key first, unless updatesOnly, then every change.
// handler gets each message on nats.go's delivery goroutine, in order.
func (b *Bucket) subscribe(ctx context.Context, cancel context.CancelCauseFunc, patterns []string, updatesOnly bool, handler nats.MsgHandler) (*nats.Subscription, error) {
	subjects := make([]string, len(patterns))
	for i, p := range patterns {
		if p == "" {
			p = ">"
		}
		subjects[i] = b.prefix + p
	}
	// Creating the consumer fails at once if the server refuses it (or the
	// reply inbox), rather than when the request times out.
	unregister := b.c.refusals.register(apiPrefix+"CONSUMER.CREATE."+b.stream+".", true, cancel)
	// A heartbeat every second lets the ordered consumer notice within a
	// few seconds that the server lost it (a restart) and recreate it from
	// the last revision seen; nothing is skipped.
	subOpts := []nats.SubOpt{nats.BindStream(b.stream), nats.OrderedConsumer(), nats.IdleHeartbeat(watchHeartbeat), nats.Context(ctx)}
	if updatesOnly {
		subOpts = append(subOpts, nats.DeliverNew())
	} else {
		subOpts = append(subOpts, nats.DeliverLastPerSubject())
	}
	subject := subjects[0]
	if len(subjects) > 1 {
		// The consumer's filters; nats.go sends its subject as the one
		// filter, which must then be empty.
		subject = ""
		subOpts = append(subOpts, nats.ConsumerFilterSubjects(subjects...))
	}
	sub, err := b.c.pushJS.Subscribe(subject, handler, subOpts...)
	unregister()
	if err != nil {
		err = b.c.watchError(ctx, b, refusal(ctx, err))
		cancel(nil)
		return nil, err
	}
	return sub, nil
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
