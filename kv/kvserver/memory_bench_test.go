package kvserver_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

// BenchmarkServerMemory stores 100k session-sized records with a per-key
// TTL in a bucket shaped as baton's, reads them all once (as a listing
// does), and reports the embedded server's live heap: right after (with
// the blocks it read still cached) and once its block cache has expired
// (10 s idle), per key. Everything on the heap then is the server's own
// index of the keys; baton holds nothing in `baton up` but its one
// connection. Run it alone, once:
//
//	go test -run '^$' -bench ServerMemory -benchtime 1x ./kv/kvserver
func BenchmarkServerMemory(b *testing.B) {
	const keys = 100_000
	for b.Loop() {
		s := kvtest.StartServer(b)
		ctx := context.Background()
		c := kvtest.Connect(b, s.ClientURL())
		if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "mem-sessions", MarkerTTL: time.Minute}); err != nil {
			b.Fatal(err)
		}
		idle := liveHeap()
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			b.Fatal(err)
		}
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
		if err != nil {
			b.Fatal(err)
		}
		for i := range keys {
			slot := fmt.Sprintf("s%06d", i)
			msg := nats.NewMsg("$KV.mem-sessions." + slot)
			msg.Header.Set("Nats-TTL", "1h")
			msg.Data = fmt.Appendf(nil, `{"slot":%q,"task_id":"bench","agent_id":"","host":"bench-host","pid":4242,"instance":"i-1","fence":0,"started_at":"2026-01-01T00:00:00Z","renewed_at":"2026-01-01T00:00:00Z","renewals":0,"message":"","result":"","meta":{}}`, slot)
			if _, err := js.PublishMsgAsync(msg); err != nil {
				b.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
		kvs, err := js.KeyValue(ctx, "mem-sessions")
		if err != nil {
			b.Fatal(err)
		}
		lister, err := kvs.ListKeys(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for range lister.Keys() {
			n++
		}
		if n != keys {
			b.Fatalf("listed %d keys, want %d", n, keys)
		}
		hot := liveHeap()
		time.Sleep(12 * time.Second) // past the file store's 10 s cache expiry
		cold := liveHeap()
		nc.Close()
		b.ReportMetric(float64(idle)/(1<<20), "MiB-idle")
		b.ReportMetric(float64(hot-idle)/(1<<20), "MiB-after-listing")
		b.ReportMetric(float64(cold-idle)/keys, "B/key-index")
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
