package lease

// The lead loop a program embeds to act only while it leads: campaign, run
// the work for the term, stop it when the term ends, hand over when asked,
// campaign again. `baton lead` is such a program.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/kv"
)

// DefaultLeadBackoff is Lead's first wait before it campaigns again after
// a campaign failed because the server was away; DefaultLeadBackoffMax is
// the most it waits.
const (
	DefaultLeadBackoff    = 250 * time.Millisecond
	DefaultLeadBackoffMax = 5 * time.Second
)

// LeadOption configures Lead.
type LeadOption func(*leadConfig) error

type leadConfig struct {
	backoff, backoffMax time.Duration
	onRetry             func(err error, wait time.Duration)
	onNotEligible       func(err error)
	onHandOver          func(to string, err error)
}

// LeadBackoff sets how long Lead waits before it campaigns again after a
// campaign failed because the server was away: first, doubled after each
// such failure up to limit, and first again once a campaign succeeds.
// Default: DefaultLeadBackoff up to DefaultLeadBackoffMax.
func LeadBackoff(first, limit time.Duration) LeadOption {
	return func(c *leadConfig) error {
		if first <= 0 || limit < first {
			return fmt.Errorf("%w: lead backoff %s up to %s: want 0 < first <= limit", ErrInvalid, first, limit)
		}
		c.backoff, c.backoffMax = first, limit
		return nil
	}
}

// OnCampaignRetry sets a function told of each campaign that failed
// because the server was away, with the error and how long Lead waits
// before it campaigns again. It runs on Lead's goroutine. Default: none.
func OnCampaignRetry(fn func(err error, wait time.Duration)) LeadOption {
	return func(c *leadConfig) error { c.onRetry = fn; return nil }
}

// OnNotEligible sets a function told, once, that this candidate may not
// lead (err wraps ErrNotEligible and names what it lacks); Lead then
// follows until its context is done. It runs on Lead's goroutine.
// Default: none.
func OnNotEligible(fn func(err error)) LeadOption {
	return func(c *leadConfig) error { c.onNotEligible = fn; return nil }
}

// OnHandOver sets a function told how each handover Lead made after a
// yield went: to is the instance asked for; err is nil when leadership was
// handed over (or, that failing, resigned), else why neither worked. It
// runs on Lead's goroutine after the work returned. Default: none.
func OnHandOver(fn func(to string, err error)) LeadOption {
	return func(c *leadConfig) error { c.onHandOver = fn; return nil }
}

// Lead campaigns for the key and runs fn while this instance leads, term
// after term, until ctx is done or fn finishes. It is the loop a program
// embeds to act only while it leads, as client-go's
// leaderelection.RunOrDie is.
//
// Each term, fn runs with the Term (its Fence is the leader's fence) and a
// context that ends when the term does. context.Cause says why:
//   - the term was lost (expired, deleted, taken, or not renewed by the
//     local deadline, which falls before the server could give leadership
//     to another, earlier by the election's Grace): a *LostError.
//   - the leader is to hand over (a transfer request, or a candidate
//     preferred by score once the minimum term passed): a *YieldError.
//     Once fn has stopped, Lead hands over with no moment without a leader
//     (resigns if that fails) and tells OnHandOver.
//   - ctx is done: ctx's cause.
//
// What fn returns says what comes next. Its context's error (ctx.Err(),
// context.Cause(ctx), or any error wrapping ErrLost or ErrYield), once that
// context ended, means the work stopped for it: Lead campaigns again, or
// returns ctx.Err() once ctx is done. nil means the work is finished: Lead gives
// leadership up (Resign: to the best other candidate, else released) and
// returns nil, or the error of giving up (a term already lost has nothing
// to give up). Any other error: Lead gives leadership up and returns it. A
// term fn stopped for while it still holds is given up before Lead goes on.
//
// A campaign that fails because the server is away or not ready
// (kv.ErrUnavailable, kv.ErrJetStreamDisabled, kv.ErrBucketNotFound,
// kv.ErrBucketMismatch) is tried again after a backoff (LeadBackoff,
// OnCampaignRetry); any other failure ends Lead with its error. A candidate
// that may not lead stays a candidate, so that it is listed, and follows
// until ctx is done; Lead then returns an error wrapping ErrNotEligible and
// ctx's error. Whenever Lead returns it has withdrawn the candidacy; giving
// up and withdrawing are bounded by the client's timeout and run even when
// ctx is done. Invalid options or a nil fn are ErrInvalid, before anything
// is written.
//
// Not guaranteed: that fn leads while its context is open. Lead cannot
// stop fn, and a paused process learns late that its term ended, so work
// that must never be done by a former leader has to carry t.Fence() to the
// resource, which refuses a fence lower than the highest it has seen. fn
// should return promptly when its context ends: within the Grace when
// renewals failed. It must not receive from t.Yield, which Lead reads.
func (e *Election) Lead(ctx context.Context, fn func(ctx context.Context, t *Term) error, opts ...LeadOption) error {
	if fn == nil {
		return fmt.Errorf("%w: lead %s: no work to run", ErrInvalid, e.key)
	}
	cfg := leadConfig{backoff: DefaultLeadBackoff, backoffMax: DefaultLeadBackoffMax}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return err
		}
	}
	defer func() {
		wctx, cancel := e.bounded(ctx)
		defer cancel()
		_ = e.Withdraw(wctx)
	}()
	wait := cfg.backoff
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := e.Campaign(ctx)
		switch {
		case err == nil && ctx.Err() != nil:
			// Interrupted just as it won: give the term straight back.
			e.giveUp(ctx, t)
			return ctx.Err()
		case err == nil:
			wait = cfg.backoff
		case errors.Is(err, ErrNotEligible):
			if cfg.onNotEligible != nil {
				cfg.onNotEligible(err)
			}
			<-ctx.Done() // follow
			return errors.Join(err, ctx.Err())
		case ctx.Err() != nil:
			return ctx.Err()
		case serverAway(err):
			if cfg.onRetry != nil {
				cfg.onRetry(err, wait)
			}
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			case <-timer.C:
			}
			wait = min(2*wait, cfg.backoffMax)
			continue
		default:
			return err
		}
		if done, err := e.leadTerm(ctx, t, fn, &cfg); done {
			return err
		}
	}
}

// errWorkReturned ends a term's context when its work returned first.
var errWorkReturned = errors.New("lease: the work returned")

// leadTerm runs fn for the term t and ends the term. done says Lead
// returns err; otherwise it campaigns again.
func (e *Election) leadTerm(ctx context.Context, t *Term, fn func(context.Context, *Term) error, cfg *leadConfig) (done bool, err error) {
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-t.Done():
			cancel(t.Err())
		case to := <-t.Yield():
			cancel(&YieldError{Key: e.key, To: to})
		case <-tctx.Done():
		}
	}()
	ferr := fn(tctx, t)
	cancel(errWorkReturned) // the first cause stands: this one only if nothing ended the term before
	<-watched
	defer t.stopAll()

	// The work stopped for its term if it returned its context's error once
	// that ended (or once the term was lost, which it may learn first);
	// such an error before that is a failure of its own.
	cause := context.Cause(tctx)
	ended := cause != errWorkReturned || t.Err() != nil
	stopped := ferr != nil && ended && (errors.Is(ferr, context.Canceled) || errors.Is(ferr, context.DeadlineExceeded) ||
		errors.Is(ferr, ErrLost) || errors.Is(ferr, ErrYield) || errors.Is(ferr, cause))
	var y *YieldError
	var gerr error
	switch {
	case stopped && errors.As(cause, &y):
		rctx, cancel := e.bounded(ctx)
		herr := t.HandOver(rctx, y.To)
		if herr != nil {
			herr = t.Resign(rctx)
		}
		cancel()
		if cfg.onHandOver != nil {
			cfg.onHandOver(y.To, herr)
		}
	case t.Err() != nil:
		// Lost (or ended by fn itself): nothing to give up.
	default:
		gerr = e.giveUp(ctx, t)
	}
	switch {
	case stopped:
		return false, nil // Lead's loop returns ctx.Err() if ctx is done
	case ferr != nil:
		return true, ferr
	default:
		return true, gerr
	}
}

// giveUp resigns the term t, bounded by the client's timeout even when ctx
// is done. A term that already ended is not an error.
func (e *Election) giveUp(ctx context.Context, t *Term) error {
	rctx, cancel := e.bounded(ctx)
	defer cancel()
	err := t.Resign(rctx)
	t.stopAll()
	if errors.Is(err, ErrLost) || errors.Is(err, ErrReleased) {
		return nil
	}
	return err
}

// bounded is a context for clean-up: ctx's values, not its end, and the
// client's timeout.
func (e *Election) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.ls.bucket.Client().Timeout())
}

// serverAway reports whether a campaign failed because the server was away
// or not ready (restarting, electing a stream leader, its bucket not there
// yet): campaigning again later may succeed. A refusal never passes.
func serverAway(err error) bool {
	if errors.Is(err, kv.ErrPermission) {
		return false
	}
	return errors.Is(err, kv.ErrUnavailable) || errors.Is(err, kv.ErrJetStreamDisabled) ||
		errors.Is(err, kv.ErrBucketNotFound) || errors.Is(err, kv.ErrBucketMismatch)
}
