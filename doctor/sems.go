package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/sem"
)

// WithLimiters checks the rate limiters of rl too: records that do not
// decode. Default: sessions only.
func WithLimiters(rl *rate.Limiters) Option { return func(c *Checker) { c.rl = rl } }

func (c *Checker) checkLimiters(ctx context.Context, r *Report) error {
	ps, err := c.rl.Inspect(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		c.add(r, Finding{Kind: KindUndecodable, Key: p.Key,
			Detail: fmt.Sprintf("rate limiter %s does not decode (revision %d): %v; every take of it is refused", p.Key, p.Revision, p.Err),
			Action: "inspect it (`nats kv get " + c.rl.Bucket().Name() + " " + p.Key + "`); remove it and create the limiter again",
		})
	}
	return nil
}

// WithSemaphores checks the semaphores of ss too: the limits bucket,
// records that do not decode, and units and waiters' tickets left by dead
// processes of this host. Default: sessions only.
func WithSemaphores(ss *sem.Semaphores) Option { return func(c *Checker) { c.ss = ss } }

func (c *Checker) checkSems(ctx context.Context, r *Report) error {
	present, err := c.checkBucketConfig(ctx, r, sem.BucketConfig(c.m.Prefix(), c.replicas))
	if err != nil || !present {
		return err
	}
	ps, err := c.ss.Inspect(ctx)
	if err != nil {
		return err
	}
	bucket := c.ss.Bucket().Name()
	for _, p := range ps {
		p := p
		reap := func(ctx context.Context) error { return c.ss.Reap(ctx, p.Key, p.Revision) }
		if p.Err != nil {
			f := Finding{Kind: KindUndecodable, Key: p.Key,
				Detail: fmt.Sprintf("%s %s of semaphore %s does not decode (revision %d): %v", p.Kind, p.Key, p.Sem, p.Revision, p.Err),
				Action: "inspect it (`nats kv get " + bucket + " " + p.Key + "`)",
			}
			switch {
			case p.Kind == sem.KindConfig:
				f.Detail += "; nobody can use the semaphore"
				f.Action += "; remove it and create the semaphore again"
			case p.TTL > 0:
				f.Detail += fmt.Sprintf("; it holds its place until its TTL (%s) ends", p.TTL)
			default:
				f.Detail += "; it has no TTL, so it holds its place for ever"
				f.Action += "; `baton doctor --fix` removes it"
				f.fix = reap
			}
			c.add(r, f)
			continue
		}
		what := "a unit"
		if p.Kind == sem.KindWaiter {
			what = "a waiter's place in line"
		}
		c.add(r, Finding{Kind: KindDeadHolder, Key: p.Key,
			Detail: fmt.Sprintf("%s of semaphore %s is held by pid %d of this host (%s), which is dead (written %s ago, TTL %s)",
				what, p.Sem, p.PID, p.Host, time.Since(p.Written).Round(time.Second), p.TTL),
			Action: "`baton doctor --fix` frees it now (the next acquirer of this host would too)",
			fix:    reap,
		})
	}
	return nil
}
