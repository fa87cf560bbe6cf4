package doctor

import (
	"context"
	"errors"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

// checkQueues reports the queues bucket's settings and each queue's
// problems: tasks whose worker died, stale key locks, tasks past their
// timeout, dead tasks, orphaned capacity tokens, undecodable records.
func (c *Checker) checkQueues(ctx context.Context, r *Report, l *session.Listing) error {
	present, err := c.checkBucketConfig(ctx, r, queue.BucketConfig(c.m.Prefix(), c.replicas))
	if err != nil || !present || l == nil {
		return err
	}
	configs, bad, err := c.qs.List(ctx)
	if err != nil {
		return err
	}
	for _, b := range bad {
		c.add(r, Finding{Kind: queue.ProblemUndecodable, Detail: b.Error(),
			Action: "inspect it (`nats kv get " + c.qs.Bucket().Name() + " QUEUE.config`); its workers stop until it decodes"})
	}
	for _, cfg := range configs {
		problems, err := c.qs.Problems(ctx, cfg.Queue, l, c.staleAfter)
		if errors.Is(err, queue.ErrQueueNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return err
		}
		for _, p := range problems {
			f := Finding{Kind: p.Kind, Key: p.Queue + "/" + p.Key, Detail: "queue " + p.Queue + ": " + p.Detail, Action: p.Action}
			if p.Task != "" && p.Key == "" {
				f.Key = p.Queue + "/" + p.Task
			}
			f.fix = p.Fix
			c.add(r, f)
		}
	}
	return nil
}

// queueLocks are the sessions that are key locks of a queue that exists:
// the queue checks judge them, with the task they hold.
func (c *Checker) queueLocks(ctx context.Context) (map[string]bool, error) {
	if c.qs == nil {
		return nil, nil
	}
	configs, _, err := c.qs.List(ctx)
	if errors.Is(err, kv.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, cfg := range configs {
		out[cfg.Queue] = true
	}
	return out, nil
}
