package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/kv"
)

// presence is a worker in its queue (key <queue>.worker.<id>): written when
// it starts, renewed every third of the queue's TTL, marked draining when
// it stops taking tasks and removed when it stops. The dispatcher offers
// tasks to the workers present, up to each one's concurrency.
//
//jsonrec:codec
type presence struct {
	Queue       string    `json:"queue"`
	Worker      string    `json:"worker"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	PIDStart    string    `json:"pid_start,omitempty"`
	Instance    string    `json:"instance"`
	Concurrency int       `json:"concurrency"`
	Draining    bool      `json:"draining,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	RenewedAt   time.Time `json:"renewed_at"`

	rev uint64 // revision (not stored)
}

func decodePresence(q string, e kv.Entry) (*presence, error) {
	var p presence
	if !p.decodeFast(e.Value, 0) {
		p = presence{}
		if err := json.Unmarshal(e.Value, &p); err != nil {
			return nil, err
		}
	}
	if p.Queue != q || p.Worker != workerOf(q, e.Key) {
		return nil, fmt.Errorf("record names worker %q of queue %q, stored as %q", p.Worker, p.Queue, e.Key)
	}
	p.rev = e.Revision
	return &p, nil
}

// encode is json.Marshal(p), member by member where it can be.
func (p *presence) encode() ([]byte, error) {
	if b, ok := p.encodeFast(); ok {
		return b, nil
	}
	return json.Marshal(p)
}

// enter writes this worker's presence, so that the dispatcher offers it
// tasks.
func (l *loop) enter(ctx context.Context) error {
	now := l.stampNow()
	p := &presence{Queue: l.w.q, Worker: l.id, Host: l.w.qs.m.Host(), PID: l.w.qs.proc.PID, PIDStart: l.w.qs.proc.Start,
		Instance: l.w.qs.m.Instance(), Concurrency: l.w.concurrency, StartedAt: now, RenewedAt: now}
	data, err := p.encode()
	if err != nil {
		return err
	}
	rev, err := l.w.qs.bucket.Create(ctx, presenceKey(l.w.q, l.id), data, time.Duration(l.cfg.TTL))
	if err != nil {
		return fmt.Errorf("queue %s: enter worker %s: %w", l.w.q, l.id, err)
	}
	p.rev = rev
	l.pres = p
	l.renewAt = time.Now().Add(time.Duration(l.cfg.TTL) / 3)
	return nil
}

// renewPresence rewrites the presence when its renewal is due, or at once
// once the worker drains: by compare-and-set, created again if it expired
// (a worker paused past its TTL).
func (l *loop) renewPresence(now time.Time) {
	if l.pres == nil || l.presBusy || l.renewAt.After(now) {
		return
	}
	if l.draining && l.pres.Draining {
		return
	}
	next := *l.pres
	next.Draining = l.draining
	next.RenewedAt = l.stampNow()
	data, err := next.encode()
	if err != nil {
		return
	}
	l.presBusy = true
	rev, ttl := l.pres.rev, time.Duration(l.cfg.TTL)
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), l.w.qs.bucket.Client().Timeout())
		defer cancel()
		key := presenceKey(l.w.q, l.id)
		nrev, err := l.w.qs.bucket.Update(ctx, key, data, ttl, rev)
		var ce *kv.ConflictError
		if errors.As(err, &ce) && ce.Current != nil && !ce.Current.Live() {
			nrev, err = l.w.qs.bucket.CreateAfter(ctx, key, data, ttl, ce.Current.Revision)
		}
		// The server's clock again: this host's may drift from it over a
		// long run, and run-at times, rate windows and schedules decide by it.
		offset, early, herr := measureOffset(ctx, l.w.qs.bucket)
		l.post(func() {
			if herr == nil {
				l.setOffset(offset, early)
			}
			l.presBusy = false
			if err != nil {
				l.renewAt = time.Now().Add(min(ttl/6, time.Second))
				l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("renew worker %s's presence: %w", l.id, err)})
				return
			}
			next.rev = nrev
			l.pres = &next
			l.renewAt = time.Now().Add(ttl / 3)
		})
	}()
}

// leave removes this worker's presence, with a bounded context of its
// own.
func (l *loop) leave() {
	if l.pres == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.w.qs.bucket.Client().Timeout())
	defer cancel()
	_ = l.w.qs.bucket.Delete(ctx, presenceKey(l.w.q, l.id), l.pres.rev, nil)
}

// measureOffset is the server's clock minus this host's, by the server's
// time of one read, and how far that may be ahead of it (half the read's
// round trip, and a millisecond).
func measureOffset(ctx context.Context, b *kv.Bucket) (offset, early time.Duration, err error) {
	t0 := time.Now()
	_, serverNow, err := b.Head(ctx)
	if err != nil {
		return 0, 0, err
	}
	rtt := time.Since(t0)
	return serverNow.Sub(t0.Add(rtt / 2)), rtt/2 + time.Millisecond, nil
}

// setOffset takes a new measure of the server's clock, for the loop and
// its index.
func (l *loop) setOffset(offset, early time.Duration) {
	l.offset, l.early = offset, early
	l.stampOffset.Store(int64(offset))
	if l.d != nil {
		l.d.x.offset, l.d.x.early = offset, early
	}
}
