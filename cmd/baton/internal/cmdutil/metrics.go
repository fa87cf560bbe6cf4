package cmdutil

import (
	"context"

	"github.com/batonhq/baton/queue"
)

// ProcessMetrics records, for --metrics, what a process that holds
// something does: `baton lead`'s terms, `baton queue work`'s tasks (its
// renewals go through Factory.RenewHook).
type ProcessMetrics interface {
	// Watch makes agent key's series present before the first term.
	Watch(agentKey string)
	// Gained records a term begun.
	Gained(agentKey string)
	// Lost records a term ended, for reason.
	Lost(agentKey, reason string)
	// Serving makes queue q's series present before the first task.
	Serving(q string)
	// TaskEvent counts a worker's event.
	TaskEvent(q string, ev queue.Event)
}

// MetricsServer serves a process's --metrics on addr until ctx is done or
// stop is called, and sets f.RenewHook to count renewals labelled by
// kind(key), one of kinds. The full program's is procmetrics/prom.Start;
// the client program has none (ADR 0030).
type MetricsServer func(ctx context.Context, f *Factory, verb, addr string, kind func(key string) string, kinds ...string) (m ProcessMetrics, stop func(), err error)
