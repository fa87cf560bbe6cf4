package session

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/batonhq/baton/internal/keepalive"
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
	k    *keeper
	stop context.CancelFunc
	wg   sync.WaitGroup
	once sync.Once
}

// Keep starts holding s, whose last write (its join or a commit) was sent
// at sent. stopBudget is the time the holder keeps, before the server's
// earliest expiry, to stop acting on a session it could not renew (at most
// a quarter of the TTL).
func (m *Manager) Keep(s *Session, sent time.Time, stopBudget time.Duration) *Keeper {
	ctx, stop := context.WithCancel(context.Background())
	kp := &Keeper{
		k:    &keeper{m: m, cur: s, lost: make(chan error, 2), sched: keepalive.New(s.TTL, stopBudget, sent)},
		stop: stop,
	}
	kp.wg.Add(2)
	go func() { defer kp.wg.Done(); kp.k.renew(ctx) }()
	go func() { defer kp.wg.Done(); kp.k.watch(ctx) }()
	return kp
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
