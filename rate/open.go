package rate

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/batonhq/baton/kv"
)

// Handle is one limiter kept open by a process that takes from it often
// (an LLM gateway, a harness): its record comes from a watch, with the
// server's time of each revision, so that a take is one compare-and-set
// where Limiters.Take reads first. Close it when done.
type Handle struct {
	ls   *Limiters
	name string
	w    *kv.Watcher
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	changed *sync.Cond
	latest  kv.Entry // the record as the watch last brought it
	wrote   uint64   // the revision of this handle's last write
	err     error    // the watch ended
}

// Open starts the watch of limiter name and returns once it has brought
// the record.
func (ls *Limiters) Open(ctx context.Context, name string) (*Handle, error) {
	e, err := ls.get(ctx, name)
	if err != nil {
		return nil, err
	}
	if _, err := decode(name, e); err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.Background())
	w, err := ls.bucket.Watch(wctx, limiterKey(name))
	if err != nil {
		stop()
		return nil, err
	}
	h := &Handle{ls: ls, name: name, w: w, stop: stop, done: make(chan struct{}), latest: e}
	h.changed = sync.NewCond(&h.mu)
	go h.follow()
	return h, nil
}

func (h *Handle) follow() {
	defer close(h.done)
	for e := range h.w.Updates() {
		if e == nil || !e.Live() {
			continue
		}
		h.mu.Lock()
		if e.Revision > h.latest.Revision {
			h.latest = *e
			h.changed.Broadcast()
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.err = errors.New("rate: the limiter's watch ended")
	h.changed.Broadcast()
	h.mu.Unlock()
}

// current is the record at or after this handle's last write, as the watch
// brought it (with its revision's time), waiting a moment for the watch to
// bring that write; a watch that is late or ended is replaced by a read.
func (h *Handle) current(ctx context.Context) (kv.Entry, error) {
	h.mu.Lock()
	if h.latest.Revision < h.wrote && h.err == nil {
		timer := time.AfterFunc(time.Second, func() {
			h.mu.Lock()
			h.changed.Broadcast()
			h.mu.Unlock()
		})
		deadline := time.Now().Add(time.Second)
		for h.latest.Revision < h.wrote && h.err == nil && time.Now().Before(deadline) {
			h.changed.Wait()
		}
		timer.Stop()
	}
	e, ok := h.latest, h.latest.Revision >= h.wrote
	h.mu.Unlock()
	if ok {
		return e, nil
	}
	return h.ls.get(ctx, h.name)
}

// Name is the limiter's name.
func (h *Handle) Name() string { return h.name }

// Take is Limiters.Take from the watched record: one compare-and-set
// while nobody else takes at the same moment.
func (h *Handle) Take(ctx context.Context, opts ...TakeOption) (*Admission, error) {
	a, err := h.takeNow(ctx, opts)
	h.ls.noticeRefusal(err)
	return a, err
}

// takeNow is Take without the refusal notice.
func (h *Handle) takeNow(ctx context.Context, opts []TakeOption) (*Admission, error) {
	cfg, err := takeOptions(opts)
	if err != nil {
		return nil, err
	}
	e, err := h.current(ctx)
	if err != nil {
		return nil, err
	}
	a, _, err := h.ls.take(ctx, h.name, e, cfg)
	if a != nil {
		h.mu.Lock()
		h.wrote = max(h.wrote, a.Revision)
		h.mu.Unlock()
	}
	return a, err
}

// TakeWait is Take that waits while the take does not fit, until ctx is
// done; as Limiters.TakeWait, only a take that gives up is told as
// refused.
func (h *Handle) TakeWait(ctx context.Context, opts ...TakeOption) (*Admission, error) {
	return h.ls.wait(ctx, func() (*Admission, error) { return h.takeNow(ctx, opts) })
}

// Close ends the watch.
func (h *Handle) Close() {
	h.stop()
	h.w.Stop()
	<-h.done
}
