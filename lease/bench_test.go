package lease_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/lease"
)

// Acquire, renew and release against nats.go's own KV Create, Update and
// Delete with the same bytes on the same connection, interleaved op by op:
// medians, their ratio (x-raw) and the library's messages per op.

type pair struct{ lib, raw []time.Duration }

func median(d []time.Duration) float64 {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[len(s)/2])
}

func (p *pair) report(b *testing.B, msgs uint64) {
	b.ReportMetric(median(p.lib), "lib-ns-median")
	b.ReportMetric(median(p.raw), "raw-ns-median")
	b.ReportMetric(median(p.lib)/median(p.raw), "x-raw")
	b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
}

func benchEnv(b *testing.B) (*env, *lease.Leases, jetstream.KeyValue, []byte) {
	e := newEnv(b)
	ls := e.leases("bench-instance", "h1")
	js, _ := jetstream.New(e.client.Conn())
	raw, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "raw", History: 1, LimitMarkerTTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	record, _ := json.Marshal(lease.Record{Key: "k", Holder: "bench-instance", Host: "h1", PID: 123456, PIDStart: "22dfbb72-a18f-46a8-b78a-306df6e6b7a6:155166", TTL: lease.Duration(time.Minute)})
	return e, ls, raw, record
}

func BenchmarkAcquireVsRawCreate(b *testing.B) {
	ctx := context.Background()
	e, ls, raw, record := benchEnv(b)
	var p pair
	var msgs uint64
	for i := range b.N {
		key := fmt.Sprintf("k%d", i)
		t0 := time.Now()
		if _, err := raw.Create(ctx, key, record, jetstream.KeyTTL(time.Minute)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		before := e.client.Conn().Stats().OutMsgs
		if _, err := ls.TryAcquire(ctx, key, lease.WithTTL(time.Minute), lease.WithoutKeepAlive()); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		msgs += e.client.Conn().Stats().OutMsgs - before
		p.raw, p.lib = append(p.raw, t1.Sub(t0)), append(p.lib, t2.Sub(t1))
	}
	p.report(b, msgs)
}

func BenchmarkRenewVsRawUpdate(b *testing.B) {
	ctx := context.Background()
	e, ls, raw, record := benchEnv(b)
	l, err := ls.TryAcquire(ctx, "k", lease.WithTTL(time.Minute), lease.WithoutKeepAlive())
	if err != nil {
		b.Fatal(err)
	}
	rev, _ := raw.Create(ctx, "k", record)
	var p pair
	var msgs uint64
	for range b.N {
		t0 := time.Now()
		if rev, err = raw.Update(ctx, "k", record, rev); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		before := e.client.Conn().Stats().OutMsgs
		if err := l.Renew(ctx); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		msgs += e.client.Conn().Stats().OutMsgs - before
		p.raw, p.lib = append(p.raw, t1.Sub(t0)), append(p.lib, t2.Sub(t1))
	}
	p.report(b, msgs)
}

func BenchmarkReleaseVsRawDelete(b *testing.B) {
	ctx := context.Background()
	e, ls, raw, record := benchEnv(b)
	var p pair
	var msgs uint64
	for i := range b.N {
		key := fmt.Sprintf("k%d", i)
		rev, err := raw.Create(ctx, key, record)
		if err != nil {
			b.Fatal(err)
		}
		l, err := ls.TryAcquire(ctx, key, lease.WithTTL(time.Minute), lease.WithoutKeepAlive())
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := raw.Delete(ctx, key, jetstream.LastRevision(rev)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		before := e.client.Conn().Stats().OutMsgs
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		msgs += e.client.Conn().Stats().OutMsgs - before
		p.raw, p.lib = append(p.raw, t1.Sub(t0)), append(p.lib, t2.Sub(t1))
	}
	p.report(b, msgs)
}

// BenchmarkHandover is the time from a leader's HandOver (transfer) or
// Resign (release; the follower takes the lease) to the follower's
// Campaign returning its term: median and p90.
func BenchmarkHandover(b *testing.B) {
	for _, how := range []string{"transfer", "resign-release"} {
		b.Run(how, func(b *testing.B) {
			ctx := context.Background()
			e := newEnv(b)
			x, err := e.leases("inst-x", "h1").Election("agent", lease.ElectTTL(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			y, err := e.leases("inst-y", "h2").Election("agent", lease.ElectTTL(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			defer x.Withdraw(ctx)
			defer y.Withdraw(ctx)
			term, err := x.Campaign(ctx)
			if err != nil {
				b.Fatal(err)
			}
			leader, follower := x, y
			var times []time.Duration
			for range b.N {
				next := make(chan *lease.Term, 1)
				go func() {
					t, err := follower.Campaign(ctx)
					if err != nil {
						b.Error(err)
					}
					next <- t
				}()
				// Wait until the follower is a candidate waiting on the lease.
				for {
					cs, _ := leader.Candidates(ctx)
					if len(cs) == 2 {
						break
					}
					time.Sleep(time.Millisecond)
				}
				time.Sleep(2 * time.Millisecond) // let it reach its watch
				start := time.Now()
				if how == "transfer" {
					err = term.HandOver(ctx, other(leader, x, y))
				} else {
					err = term.Release(ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
				term = <-next
				times = append(times, time.Since(start))
				leader, follower = follower, leader
			}
			term.Release(ctx)
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(times[len(times)*9/10].Microseconds())/1000, "p90-ms")
		})
	}
}

func other(cur, x, y *lease.Election) string {
	if cur == x {
		return "inst-y"
	}
	return "inst-x"
}
