package kv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/kv/kvtest"
)

// BenchmarkRollingRestart restarts the three servers of a cluster one after
// the other, the leader of the written stream first, while a client
// CAS-updates a key every 50 ms and holds a lease with a 2s TTL, and
// reports the longest time between two acknowledged writes (max-gap-ms,
// the worst of the iterations), the writes that failed (errors) and the
// leases lost. Each iteration is one rolling restart of a fresh cluster;
// run it with go test -run '^$' -bench RollingRestart -benchtime 3x ./kv/.
// The variants:
//   - handoff: each server is stopped after HandOff, as `baton up` does;
//   - plain: each server is stopped at once (nats-server's own shutdown
//     steps its leaders down without waiting);
//   - settled: the next server is stopped once the restarted one is
//     current, as an operator who watches health does;
//   - hurried: the next server is stopped as soon as the restarted one
//     accepts clients, after 2000 writes it has to catch up on.
func BenchmarkRollingRestart(b *testing.B) {
	for _, handoff := range []bool{true, false} {
		for _, hurried := range []bool{false, true} {
			name := map[bool]string{true: "handoff", false: "plain"}[handoff] + "/" + map[bool]string{true: "hurried", false: "settled"}[hurried]
			b.Run(name, func(b *testing.B) {
				var worst time.Duration
				errs, lost := 0, 0
				for range b.N {
					gap, e, l := rollingRestart(b, handoff, hurried)
					worst = max(worst, gap)
					errs += e
					lost += l
				}
				b.ReportMetric(float64(worst.Milliseconds()), "max-gap-ms")
				b.ReportMetric(float64(errs), "errors")
				b.ReportMetric(float64(lost), "leases-lost")
			})
		}
	}
}

func rollingRestart(b *testing.B, handoff, hurried bool) (gap time.Duration, errs, lost int) {
	b.StopTimer()
	ctx := context.Background()
	r := startRoll(b, true)
	cl, bk, held, buckets, streams, w, order := r.cl, r.b, r.held, r.buckets, r.streams, r.w, r.order
	b.StartTimer()
	for _, i := range order {
		if handoff {
			own := kvtest.Connect(b, cl.Servers[i].ClientURL())
			hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if _, err := own.HandOff(hctx, cl.Servers[i].Name(), buckets...); err != nil {
				b.Logf("hand off %s: %v", cl.Servers[i].Name(), err)
			}
			cancel()
			own.Close()
		}
		cl.Stop(i)
		w.acks(b, 3)
		if hurried {
			for k := range 2000 {
				if _, err := bk.Create(ctx, fmt.Sprintf("fill-%d-%d", i, k), make([]byte, 256), 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		cl.Restart(i)
		if !hurried {
			cl.WaitCurrent(i, 30*time.Second, streams...)
			w.acks(b, 3)
		}
	}
	w.acks(b, 3)
	b.StopTimer()
	w.halt()
	select {
	case <-held.Done():
		lost = 1
	default:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxGap, len(w.errs), lost
}
