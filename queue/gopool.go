package queue

import "sync"

// goPool runs functions on goroutines it keeps between calls. A worker
// starts a few goroutines for each task (its claim, its work, the end's
// writes, an inbox write), and each went through the NATS client deep
// enough to grow its stack from the 2 KiB a goroutine starts with, by
// copying, every time: about a tenth of a worker's CPU. A kept goroutine
// grows once. At most keep wait idle; the rest end when their function
// returns.
type goPool struct {
	mu     sync.Mutex
	idle   []chan func()
	keep   int
	closed bool
}

func newGoPool(keep int) *goPool { return &goPool{keep: keep} }

// Go runs f on an idle goroutine of the pool, or on a new one.
func (p *goPool) Go(f func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		ch := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		ch <- f // its goroutine waits for it
		return
	}
	p.mu.Unlock()
	go p.run(f)
}

func (p *goPool) run(f func()) {
	ch := make(chan func())
	for f != nil {
		f()
		f = nil
		p.mu.Lock()
		if p.closed || len(p.idle) >= p.keep {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, ch)
		p.mu.Unlock()
		f = <-ch // nil once closed
	}
}

// Close ends the idle goroutines; those running end when their function
// returns. Go may still be called: it then starts goroutines that end
// after their function.
func (p *goPool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, ch := range idle {
		close(ch)
	}
}

// idleCount is how many goroutines wait for work (tests).
func (p *goPool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
