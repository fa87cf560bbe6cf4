package session

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/batonhq/baton/internal/keepalive"
	"github.com/batonhq/baton/kv"
)

// Keeper holds a session for a holder that does not renew it itself (an
// agent behind `baton mcp`): it renews the session on the schedule Run uses
// (every third of its TTL, sooner after a failure) and watches it, and
// reports on Lost the moment it is lost.
//
// What it guarantees: a loss (a close, an expiry, another session taking
// the slot) is reported once, as a *LostError; when renewals keep failing
// (the server cannot be reached), the loss (LostUnrenewed) is reported at
// a local deadline that comes before the server could expire the session,
// by at least stopBudget. What it does not: it stops nothing when the
// session is lost; the holder must stop acting on it. It never closes the
// session: Stop, then Close, does.
type Keeper struct {
	k     *keeper
	stop  context.CancelFunc
	wg    sync.WaitGroup
	once  sync.Once
	group *KeepGroup // nil: the keeper watches its session itself
	slot  string
}

// Keep starts holding s, whose last write (its join or a commit) was sent
// at sent. stopBudget is the time the holder keeps, before the server's
// earliest expiry, to stop acting on a session it could not renew (at most
// a quarter of the TTL).
func (m *Manager) Keep(s *Session, sent time.Time, stopBudget time.Duration) *Keeper {
	kp := m.newKeeper(s, sent, stopBudget)
	ctx, stop := context.WithCancel(context.Background())
	kp.stop = stop
	kp.wg.Add(2)
	go func() { defer kp.wg.Done(); kp.k.renew(ctx) }()
	go func() { defer kp.wg.Done(); kp.k.watch(ctx) }()
	return kp
}

func (m *Manager) newKeeper(s *Session, sent time.Time, stopBudget time.Duration) *Keeper {
	return &Keeper{slot: s.Slot, k: &keeper{m: m, cur: s, lost: make(chan error, 2), sched: keepalive.New(s.TTL, stopBudget, sent)}}
}

// KeepGroup holds many sessions of one manager with one watch of the
// bucket between them, where Keep starts one per session: a holder of
// several slots (or of one slot after another) pays for one watch, once.
// Its keepers behave as Keep's: a change of a kept slot that the watch
// delivered before its Keep (or that came before the watch started) is
// caught by one read of the slot, made in the background by Keep.
type KeepGroup struct {
	m       *Manager
	mu      sync.Mutex
	keepers map[string]*Keeper // by slot
	lastRev uint64             // the last revision the watch delivered
	stop    context.CancelFunc // nil until the watch starts, or once closed
	closed  bool
	wg      sync.WaitGroup
}

// KeepGroup returns an empty group of keepers of m's sessions. Close it
// when done.
func (m *Manager) KeepGroup() *KeepGroup {
	return &KeepGroup{m: m, keepers: map[string]*Keeper{}}
}

// Keep starts holding s as Manager.Keep does, with the group's watch. It
// replaces a keeper of the same slot in the group, which must have been
// stopped.
func (g *KeepGroup) Keep(s *Session, sent time.Time, stopBudget time.Duration) *Keeper {
	kp := g.m.newKeeper(s, sent, stopBudget)
	kp.group = g
	ctx, stop := context.WithCancel(context.Background())
	kp.stop = stop
	g.mu.Lock()
	g.keepers[s.Slot] = kp
	// Changes of the slot the watch delivered before kp was registered
	// (or that came before the watch started) were not checked: read the
	// slot once, in the background, when there may be any.
	missed := g.lastRev > s.Revision
	if g.stop == nil && !g.closed {
		missed = true
		wctx, wstop := context.WithCancel(context.Background())
		if w, err := g.m.bucket.Watch(wctx, "", kv.UpdatesOnly()); err == nil {
			g.stop = wstop
			g.wg.Add(1)
			go func() { defer g.wg.Done(); g.dispatch(w) }()
		} else {
			wstop() // the renewals still detect a loss; the next Keep tries again
		}
	}
	g.mu.Unlock()
	kp.wg.Add(1)
	go func() { defer kp.wg.Done(); kp.k.renew(ctx) }()
	if missed {
		kp.wg.Add(1)
		go func() {
			defer kp.wg.Done()
			e, err := g.m.bucket.Latest(ctx, s.Slot)
			if err == nil {
				g.deliver(kp, &e)
			}
		}()
	}
	return kp
}

// deliver reports e to kp if it is the loss of kp's session and kp is
// still in the group (so nothing is sent after Stop).
func (g *KeepGroup) deliver(kp *Keeper, e *kv.Entry) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keepers[kp.slot] != kp {
		return
	}
	if lost := lossOf(e, kp.Session()); lost != nil {
		delete(g.keepers, kp.slot)
		select {
		case kp.k.lost <- lost:
		default: // a loss is reported already
		}
	}
}

// dispatch hands each change to the keeper of its slot.
func (g *KeepGroup) dispatch(w *kv.Watcher) {
	defer w.Stop()
	for e := range w.Updates() {
		if e == nil {
			continue
		}
		g.mu.Lock()
		g.lastRev = max(g.lastRev, e.Revision)
		kp := g.keepers[e.Key]
		g.mu.Unlock()
		if kp != nil {
			g.deliver(kp, e)
		}
	}
	// The watch ended (the connection closed for good): a later Keep
	// starts another.
	g.mu.Lock()
	g.stop = nil
	g.mu.Unlock()
}

// forget removes kp from the group, if it is there.
func (g *KeepGroup) forget(kp *Keeper) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keepers[kp.slot] == kp {
		delete(g.keepers, kp.slot)
	}
}

// Close stops the group's watch and waits for it. It does not stop the
// keepers. It is idempotent.
func (g *KeepGroup) Close() {
	g.mu.Lock()
	stop := g.stop
	g.stop, g.closed = nil, true
	g.mu.Unlock()
	if stop != nil {
		stop()
	}
	g.wg.Wait()
}

// Session is the last version of the session the keeper wrote or saw.
func (kp *Keeper) Session() *Session { return kp.k.session() }

// Lost delivers the session's loss (a *LostError, or the error that ended
// the renewals). It is not closed; after Stop nothing more is sent.
func (kp *Keeper) Lost() <-chan error { return kp.k.lost }

// Commit renews the session now, recording message (empty keeps the last),
// and returns its new version; the background renewals go on from it.
// Errors are Manager.Commit's.
func (kp *Keeper) Commit(ctx context.Context, message string) (*Session, error) {
	next, err := kp.k.m.Commit(ctx, kp.k.session(), message)
	if err != nil {
		return nil, err
	}
	kp.k.advance(next)
	return next, nil
}

// Stop ends the renewals and the watch and waits for them. It does not
// close the session. It is idempotent.
func (kp *Keeper) Stop() {
	kp.once.Do(func() {
		if kp.group != nil {
			kp.group.forget(kp)
		}
		kp.stop()
		kp.wg.Wait()
	})
}

// Close stops the keeper and closes the session with result, within d (the
// keeper's context may be long gone). A session already gone is not an
// error; one another session replaced is a *LostError.
func (kp *Keeper) Close(result string, d time.Duration) error {
	kp.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := kp.k.m.Close(ctx, kp.k.session(), result); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}
