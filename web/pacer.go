package web

import (
	"context"
	"sync"
	"time"
)

// pacer reads named things again when they are marked as changed, each at
// most once per its period and no more often than four times its last
// read took, so that something under constant change costs the server a
// bounded share of its time.
type pacer struct {
	every time.Duration
	read  func(ctx context.Context, name string)

	mu    sync.Mutex
	dirty map[string]bool
	wake  chan struct{}
}

func newPacer(every time.Duration, read func(ctx context.Context, name string)) *pacer {
	return &pacer{every: every, read: read, dirty: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// mark asks for name to be read again.
func (p *pacer) mark(name string) {
	p.mu.Lock()
	p.dirty[name] = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run reads what is marked, paced, until ctx is done.
func (p *pacer) run(ctx context.Context) {
	next := map[string]time.Time{} // earliest next read, by name
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		wait := time.Hour
		var due []string
		p.mu.Lock()
		for name := range p.dirty {
			if at := next[name]; !now.Before(at) {
				due = append(due, name)
				delete(p.dirty, name)
			} else {
				wait = min(wait, at.Sub(now))
			}
		}
		p.mu.Unlock()
		for _, name := range due {
			began := time.Now()
			p.read(ctx, name)
			next[name] = began.Add(max(p.every, 4*time.Since(began)))
		}
		if len(due) > 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
	}
}
