package hostlocal

import (
	"context"
	"sync"
)

// ExitWatch waits for processes of this host to exit and tells of each
// exit on C, so that a waiter frees what a dead holder held at once. A
// process of another boot (or of a platform without start times) is not
// waited for: its pid means nothing here. A process is told of once: one
// added again after its exit is not waited for again.
type ExitWatch struct {
	ctx     context.Context
	cancel  context.CancelFunc
	c       chan struct{}
	mu      sync.Mutex
	waiting map[Process]bool
	exited  map[Process]bool
	news    []Process // exited, not yet taken by Exited
	wg      sync.WaitGroup
}

// NewExitWatch returns a watch that waits until ctx is done or Stop.
func NewExitWatch(ctx context.Context) *ExitWatch {
	ctx, cancel := context.WithCancel(ctx)
	return &ExitWatch{ctx: ctx, cancel: cancel, c: make(chan struct{}, 1), waiting: map[Process]bool{}, exited: map[Process]bool{}}
}

// C receives after one or more of the processes waited for exited.
func (x *ExitWatch) C() <-chan struct{} { return x.c }

// Add waits for p to exit, unless a wait for it runs already.
func (x *ExitWatch) Add(p Process) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.waiting[p] || x.exited[p] || !p.ThisBoot() {
		return
	}
	x.waiting[p] = true
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		if WaitExit(x.ctx, p) != nil {
			return
		}
		x.mu.Lock()
		delete(x.waiting, p)
		x.exited[p] = true
		x.news = append(x.news, p)
		x.mu.Unlock()
		select {
		case x.c <- struct{}{}:
		default:
		}
	}()
}

// Exited returns the processes that exited since the last call.
func (x *ExitWatch) Exited() []Process {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := x.news
	x.news = nil
	return out
}

// Stop ends every wait and returns once they have.
func (x *ExitWatch) Stop() {
	x.cancel()
	x.wg.Wait()
}
