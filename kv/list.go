package kv

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

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

// Entries is ListMatching in the order the stream holds the entries
// (their revisions), unsorted: for readers that sum up rather than print.
func (b *Bucket) Entries(ctx context.Context, pattern string) ([]Entry, error) {
	ctx, cancel := b.c.callCtx(ctx)
	defer cancel()
	s, err := startScan[struct{}](ctx, b, pattern, maxListRoom)
	if err != nil {
		return nil, err
	}
	for range s.batches {
	}
	ds, err := s.result()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(ds))
	for i := range ds {
		out[i] = ds[i].Entry
	}
	return out, nil
}

// Decoded is a live entry of a listing and what its decode made of it.
type Decoded[T any] struct {
	Entry Entry
	Out   T
	Err   error
}

// ListDecoded is ListMatching with decode applied to every live entry while
// the rest are still arriving: batches of entries are decoded on up to
// GOMAXPROCS goroutines as the watch delivers, so that a large listing
// costs little more than its transfer. decode is called once per entry,
// from several goroutines at once. The result is in key order; its
// entries' Value is nil (decode saw it; Out is what is kept).
func ListDecoded[T any](ctx context.Context, b *Bucket, pattern string, decode func(Entry) (T, error)) ([]Decoded[T], error) {
	out, err := EntriesDecoded(ctx, b, pattern, decode)
	if err != nil {
		return nil, err
	}
	sortByKey(out)
	return out, nil
}

// EntriesDecoded is ListDecoded in the order the stream holds the entries
// (as Entries), unsorted.
func EntriesDecoded[T any](ctx context.Context, b *Bucket, pattern string, decode func(Entry) (T, error)) ([]Decoded[T], error) {
	return entriesDecoded(ctx, b, pattern, maxListRoom, decode)
}

// entriesDecoded is EntriesDecoded with room for at most room entries at
// first.
func entriesDecoded[T any](ctx context.Context, b *Bucket, pattern string, room int, decode func(Entry) (T, error)) ([]Decoded[T], error) {
	ctx, cancel := b.c.callCtx(ctx)
	defer cancel()
	s, err := startScan[T](ctx, b, pattern, room)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for batch := range s.batches {
				for i := range batch {
					d := &batch[i]
					d.Out, d.Err = decode(d.Entry)
					// What decode made of it is kept, not the bytes too:
					// 100k records would otherwise be held twice.
					d.Entry.Value = nil
				}
			}
		})
	}
	wg.Wait()
	return s.result()
}

// sortByKey sorts a listing by key. Sorting the entries themselves moves
// each (over a hundred bytes) about log n times; this sorts small key and
// position pairs, compared by their keys' first eight bytes as one number
// first, then moves each entry once.
func sortByKey[T any](ds []Decoded[T]) {
	byKey := func(x, y Decoded[T]) int { return strings.Compare(x.Entry.Key, y.Entry.Key) }
	if slices.IsSortedFunc(ds, byKey) {
		return
	}
	type keyPos struct {
		head uint64 // the key's first eight bytes, big-endian, zero-padded
		key  string
		pos  int
	}
	order := make([]keyPos, len(ds))
	for i := range ds {
		k := ds[i].Entry.Key
		var head uint64
		for j := range 8 {
			head <<= 8
			if j < len(k) {
				head |= uint64(k[j])
			}
		}
		order[i] = keyPos{head, k, i}
	}
	// Zero-padded heads order as their keys do, but for keys whose heads
	// are equal: those are compared whole.
	slices.SortFunc(order, func(x, y keyPos) int {
		if c := cmp.Compare(x.head, y.head); c != 0 {
			return c
		}
		return strings.Compare(x.key, y.key)
	})
	// Position i takes the entry at order[i].pos: follow each cycle of
	// that permutation, holding one entry aside.
	for start := range order {
		if order[start].pos < 0 {
			continue
		}
		held := ds[start]
		for i := start; ; {
			from := order[i].pos
			order[i].pos = -1
			if from == start {
				ds[i] = held
				break
			}
			ds[i] = ds[from]
			i = from
		}
	}
}

// listBatch is how many entries a listing hands a decoding goroutine at once.
const listBatch = 256

// scan is one listing: an ordered consumer that delivers the latest
// revision of each key matching a pattern (as a watch does), whose live
// entries it hands out in batches, in the stream's order, until it has
// every one the consumer had pending when it started. It builds the entries
// on nats.go's delivery goroutine, with nothing per entry beyond the entry
// itself (a watch sends each through a channel), into one slice sized for
// all of them: the batches are parts of it, and the readers of a batch
// work on its entries in place.
type scan[T any] struct {
	// batches is closed when every entry is in, or the scan failed
	// (result says which).
	batches chan []Decoded[T]
	stop    chan struct{} // closed when the scan is abandoned
	stopped sync.Once
	cancel  context.CancelCauseFunc

	mu       sync.Mutex // held by the handler while it delivers
	ended    bool       // batches is closed
	err      error      // why it ended early
	pending  uint64     // messages the consumer had pending when it started
	received uint64
	all      []Decoded[T]   // the live entries, in the stream's order
	full     [][]Decoded[T] // those before all, if it had to grow
	start    int            // where in all the batch being filled starts
}

// startScan starts a scan of the keys matching pattern, with room for at
// most room entries at first; ctx's end abandons it.
func startScan[T any](ctx context.Context, b *Bucket, pattern string, room int) (*scan[T], error) {
	// The subscription's own context, ended with the scan.
	ctx, cancel := context.WithCancelCause(ctx)
	s := &scan[T]{batches: make(chan []Decoded[T], runtime.GOMAXPROCS(0)), stop: make(chan struct{}), cancel: cancel}
	var ttls lastTTL // only the handler's, which nats.go calls in turn
	handler := func(m *nats.Msg) {
		e, pending, ok := b.entryOfMsg(m, &ttls)
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.ended {
			return
		}
		if e.Live() {
			if len(s.all) == cap(s.all) {
				// More than the room taken at first (or than the
				// consumer said: one recreated after a server restart):
				// go on in more, after the batch being filled.
				if !s.flush() {
					return
				}
				s.full = append(s.full, s.all)
				s.all, s.start = make([]Decoded[T], 0, max(listBatch, cap(s.all))), 0
			}
			s.all = append(s.all, Decoded[T]{Entry: e})
			if len(s.all)-s.start == listBatch && !s.flush() {
				return
			}
		}
		s.received++
		if s.received >= s.pending || pending == 0 {
			s.finish()
		}
	}
	// Hold the lock until the initial state is known, so the handler cannot
	// run ahead of it.
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, err := b.subscribe(ctx, cancel, []string{pattern}, false, handler)
	if err != nil {
		return nil, err
	}
	early := fmt.Errorf("%w: list %s on %s: the watch ended early", ErrUnavailable, b.cfg.Name, b.c.url)
	sub.SetClosedHandler(func(string) { go s.abort(early) })
	if !sub.IsValid() {
		// Closed before its closed handler was set (ctx was done at once).
		go s.abort(early)
	}
	switch pending, err := sub.InitialConsumerPending(); {
	case err != nil:
		s.pending = math.MaxUint64 // until a message says none is left
		s.all = make([]Decoded[T], 0, listBatch)
	case pending == 0:
		s.finish()
	default:
		s.pending = pending
		// Room for every entry, live or not, that the consumer has.
		s.all = make([]Decoded[T], 0, min(pending, uint64(room)))
	}
	go func() {
		select {
		case <-ctx.Done():
			s.abort(b.c.requestError("list "+b.cfg.Name, ctx.Err()))
		case <-s.stop:
		}
	}()
	return s, nil
}

// maxListRoom bounds the room a listing takes at first (4M entries, about
// 450 MB); more is made as they come.
const maxListRoom = 1 << 22

// flush hands out the batch being filled, unless the scan is abandoned
// first. The caller holds s.mu.
func (s *scan[T]) flush() bool {
	if len(s.all) == s.start {
		return true
	}
	select {
	case s.batches <- s.all[s.start:len(s.all):len(s.all)]:
		s.start = len(s.all)
		return true
	case <-s.stop:
		return false
	}
}

// finish ends a scan that has every entry. The caller holds s.mu.
func (s *scan[T]) finish() {
	if !s.flush() {
		return
	}
	s.ended = true
	close(s.batches)
	s.stopped.Do(func() { close(s.stop) })
	s.cancel(nil)
}

// abort ends a scan that does not have every entry, with err, unless it
// has ended already.
func (s *scan[T]) abort(err error) {
	s.stopped.Do(func() { close(s.stop) }) // a handler waiting to hand out a batch gives up
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended = true
		s.err = err
		close(s.batches)
	}
	s.cancel(nil)
}

// result is the scan's live entries in the stream's order, or why it ended
// before it had them all. Its batches must all have been read.
func (s *scan[T]) result() ([]Decoded[T], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	if len(s.full) == 0 {
		return s.all, nil
	}
	n := len(s.all)
	for _, f := range s.full {
		n += len(f)
	}
	out := make([]Decoded[T], 0, n)
	for _, f := range s.full {
		out = append(out, f...)
	}
	return append(out, s.all...), nil
}
