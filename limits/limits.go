// Package limits names the bucket baton's shared limits live in:
// semaphores (package sem) and rate limiters (package rate), and the
// lines of waiters (package waitline) of leases and slots.
package limits

import (
	"time"

	"github.com/batonhq/baton/kv"
)

// MarkerTTL is how long a released or expired record's tombstone stays.
const MarkerTTL = 5 * time.Minute

// BucketConfig is the expected configuration of the limits bucket:
// <prefix>-limits, no bucket TTL (each record carries its own, if any),
// one revision per key, markers so that waiters see expiries. Replicas 0
// means "as it is" (see kv.BucketConfig).
func BucketConfig(prefix string, replicas int) kv.BucketConfig {
	return kv.BucketConfig{
		Name:        prefix + "-limits",
		Description: "baton semaphores and rate limiters",
		MarkerTTL:   MarkerTTL,
		Replicas:    replicas,
	}
}

// RefusalSubject is the core NATS subject a refused take of rate limiter
// name is told on, so that a dashboard can count refusals, which write
// nothing: baton.<prefix>.rate.refused.<name>, the take's cost in decimal
// as the body. A notice is fire and forget: nobody may be listening, and
// a notice lost with a connection is not sent again.
func RefusalSubject(prefix, name string) string {
	return "baton." + prefix + ".rate.refused." + name
}

// RefusalSubjects matches the refusal notices of every limiter of prefix.
func RefusalSubjects(prefix string) string { return "baton." + prefix + ".rate.refused.*" }

// HandoffSubject is the core NATS subject on which the first waiter of a
// semaphore's space (sem.<space>.…) offers to be handed units, and its
// holders listen: baton.<prefix>.sem.next.<space> (ADR 0045). Like a
// refusal notice it is fire and forget.
func HandoffSubject(prefix, space string) string {
	return "baton." + prefix + ".sem.next." + space
}
