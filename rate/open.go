package rate

import (
	"context"
	"sync"
	"time"
)

// Handle is one limiter kept open by a process that takes from it often
// (an LLM gateway, a harness): it keeps the record as it last wrote or
// read it, so that a take is one compare-and-set where Limiters.Take reads
// first. Close it when done.
//
// The server tells a writer no time, and a take is decided at a time no
// later than its own write's: a Handle knows the server's clock within
// bounds, measured with a read of it when opened and every
// clockEvery after (a round trip in the background), and widened by
// maxDrift for the time since. It decides at the lower bound of the
// server's time when it sends, and stamps its own take, when the next
// take moves it into the record's log, with the upper bound of the time
// its write's answer came: a take counts for at most a few round trips
// longer than it must, never shorter. A write of another taker comes
// back in a lost compare-and-set, read with its exact time.
type Handle struct {
	ls   *Limiters
	name string
	stop context.CancelFunc
	done chan struct{}

	mu    sync.Mutex
	cur   seen      // the record as last written or read
	clock clockSpan // the server's clock, as last measured
}

// clockEvery is how often an open limiter reads the server's clock again.
const clockEvery = 2 * time.Second

// maxDrift bounds how far the local clock may run from the server's, per
// second: 500 ppm, the most NTP slews a clock, and far more than a
// quartz clock drifts.
const maxDrift = 500e-6

// clockSpan is one reading of the server's clock: at, as read, between
// sent and got on this host's monotonic clock.
type clockSpan struct {
	at        time.Time // the server's time (no monotonic reading)
	sent, got time.Time // local, with monotonic readings
}

// lower is a time no later than the server's clock at local instant x.
func (c clockSpan) lower(x time.Time) time.Time {
	since := x.Sub(c.got)
	return c.at.Add(since - drift(x.Sub(c.sent)))
}

// upper is a time no earlier than the server's clock at local instant x.
func (c clockSpan) upper(x time.Time) time.Time {
	since := x.Sub(c.sent)
	return c.at.Add(since + drift(since))
}

func drift(d time.Duration) time.Duration {
	return time.Duration(float64(max(d, -d)) * maxDrift)
}

// readClock reads the server's clock with its bounds.
func (ls *Limiters) readClock(ctx context.Context) (clockSpan, error) {
	sent := time.Now()
	at, err := ls.bucket.ServerTime(ctx)
	if err != nil {
		return clockSpan{}, err
	}
	return clockSpan{at: at, sent: sent, got: time.Now()}, nil
}

// Open reads limiter name and the server's clock, and keeps the clock
// measured until Close.
func (ls *Limiters) Open(ctx context.Context, name string) (*Handle, error) {
	e, err := ls.get(ctx, name)
	if err != nil {
		return nil, err
	}
	if _, err := decode(name, e); err != nil {
		return nil, err
	}
	clock, err := ls.readClock(ctx)
	if err != nil {
		return nil, err
	}
	bg, stop := context.WithCancel(context.Background())
	h := &Handle{ls: ls, name: name, stop: stop, done: make(chan struct{}), cur: seen{e: e, exact: true}, clock: clock}
	go h.measure(bg)
	return h, nil
}

// measure reads the server's clock every clockEvery until ctx is done; a
// read that fails leaves the last one, whose bounds widen with its age.
func (h *Handle) measure(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(clockEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, h.ls.bucket.Client().Timeout())
		c, err := h.ls.readClock(rctx)
		cancel()
		if err == nil {
			h.mu.Lock()
			h.clock = c
			h.mu.Unlock()
		}
	}
}

// Name is the limiter's name.
func (h *Handle) Name() string { return h.name }

// Take is Limiters.Take from the record as this handle last knew it: one
// compare-and-set while nobody else takes from the limiter.
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
	h.mu.Lock()
	cur, clock := h.cur, h.clock
	h.mu.Unlock()
	a, last, err := h.ls.take(ctx, h.name, cur, clock.lower(time.Now()), cfg)
	if a != nil {
		// Its own write: no earlier than now on the server.
		last.e.Created = clock.upper(time.Now())
	}
	h.mu.Lock()
	if last.e.Revision > h.cur.e.Revision {
		h.cur = last
	}
	h.mu.Unlock()
	return a, err
}

// TakeWait is Take that waits while the take does not fit, until ctx is
// done; as Limiters.TakeWait, only a take that gives up is told as
// refused.
func (h *Handle) TakeWait(ctx context.Context, opts ...TakeOption) (*Admission, error) {
	return h.ls.wait(ctx, func() (*Admission, error) { return h.takeNow(ctx, opts) })
}

// Close stops the clock's measuring.
func (h *Handle) Close() {
	h.stop()
	<-h.done
}
