package kv_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

// BenchmarkDelete is a create and a delete of a fresh key, 16 at once, in
// a bucket that other clients watch one key each of (as a queue's workers
// watch their inboxes): a delete's cost must not grow with the watches on
// the bucket (adr/0038). Run it with
// go test -run '^$' -bench Delete -count 5 ./kv/ and compare watchers-64
// with watchers-0.
func BenchmarkDelete(b *testing.B) {
	for _, n := range []int{0, 64} {
		b.Run(fmt.Sprintf("watchers-%d", n), func(b *testing.B) {
			ctx := context.Background()
			s := kvtest.StartServer(b)
			c := kvtest.Connect(b, s.ClientURL())
			bucket, err := c.Ensure(ctx, kv.BucketConfig{Name: "del", MarkerTTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				wc := kvtest.Connect(b, s.ClientURL())
				w, err := wc.Bucket(kv.BucketConfig{Name: "del", MarkerTTL: time.Minute}).Watch(ctx, fmt.Sprintf("inbox.%d", i))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(w.Stop)
			}
			var next atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := fmt.Sprintf("task.%d", next.Add(1))
					rev, err := bucket.Create(ctx, key, []byte("a task's record, about as long as one"), time.Minute)
					if err != nil {
						b.Error(err)
						return
					}
					if err := bucket.Delete(ctx, key, rev, []byte("done")); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
