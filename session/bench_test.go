package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/session"
)

// The library's join, commit and close against the raw KV operation they
// stand on (nats.go's Create, Update and Delete with a revision), on the
// same connection, interleaved op by op so that both see the same machine.
// Each reports ns/op of the library, the raw op's ns, the ratio of medians
// (x-raw) and the messages the library sent per op (msgs/op).

type pair struct{ lib, raw []time.Duration }

// record is what the raw operations write: a session record of the size
// baton writes, so both sides carry the same bytes.
var record = func() []byte {
	now := time.Now().UTC()
	b, _ := json.Marshal(session.Record{
		Slot: "slot", TaskID: "T", Host: "h1", PID: 123456, PIDStart: "22dfbb72-a18f-46a8-b78a-306df6e6b7a6:155166",
		Instance: "308c17ab-d396-4d55-ac0f-8efe4e682a8d", StartedAt: now, RenewedAt: now,
	})
	return b
}()

func (p *pair) report(b *testing.B, msgs uint64) {
	med := func(d []time.Duration) float64 {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[len(s)/2])
	}
	b.ReportMetric(med(p.lib), "lib-ns-median")
	b.ReportMetric(med(p.raw), "raw-ns-median")
	b.ReportMetric(med(p.lib)/med(p.raw), "x-raw")
	b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
}

// benchEnv is a manager and a raw bucket on one connection. The state
// directory is on the test's temp dir, or on tmpfs when onTmpfs (file
// creation, which a first join of a slot does for its gate file, costs up
// to a millisecond on some disk filesystems and microseconds on tmpfs).
func benchEnv(b *testing.B, onTmpfs bool) (*session.Manager, jetstream.KeyValue) {
	e := newEnv(b)
	dir := b.TempDir()
	if onTmpfs {
		d, err := os.MkdirTemp("/dev/shm", "baton-bench-")
		if err != nil {
			b.Skip("no tmpfs at /dev/shm")
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	m := e.manager("h1", dir)
	raw, err := jetstream.New(e.client.Conn())
	if err != nil {
		b.Fatal(err)
	}
	kv, err := raw.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "raw", History: 1, LimitMarkerTTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	return m, kv
}

func BenchmarkJoinVsRawCreate(b *testing.B) {
	b.Run("disk", func(b *testing.B) { benchJoinFresh(b, false) })
	b.Run("tmpfs", func(b *testing.B) { benchJoinFresh(b, true) })
}

// benchJoinFresh joins a slot never used before (one KV round trip and the
// creation of its gate file).
func benchJoinFresh(b *testing.B, onTmpfs bool) {
	ctx := context.Background()
	m, raw := benchEnv(b, onTmpfs)
	var p pair
	var msgs uint64
	b.ResetTimer()
	for i := range b.N {
		key := fmt.Sprintf("k%d", i)
		t0 := time.Now()
		if _, err := raw.Create(ctx, key, record, jetstream.KeyTTL(time.Minute)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		before := m.Bucket().Client().Conn().Stats().OutMsgs
		if _, err := m.Join(ctx, key, "T", session.WithTTL(time.Minute)); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		msgs += m.Bucket().Client().Conn().Stats().OutMsgs - before
		p.raw, p.lib = append(p.raw, t1.Sub(t0)), append(p.lib, t2.Sub(t1))
	}
	p.report(b, msgs)
}

// BenchmarkJoinReusedVsRawCreate joins a slot closed just before, over its
// tombstone: a create that fails, a read and a create at the tombstone's
// revision, for baton as for nats.go's Create.
func BenchmarkJoinReusedVsRawCreate(b *testing.B) {
	ctx := context.Background()
	m, raw := benchEnv(b, false)
	var p pair
	var msgs uint64
	for range b.N {
		b.StopTimer()
		rev, err := raw.Create(ctx, "slot", record)
		if err != nil {
			b.Fatal(err)
		}
		if err := raw.Delete(ctx, "slot", jetstream.LastRevision(rev)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if rev, err = raw.Create(ctx, "slot", record); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		before := m.Bucket().Client().Conn().Stats().OutMsgs
		s, err := m.Join(ctx, "slot", "T", session.WithTTL(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		msgs += m.Bucket().Client().Conn().Stats().OutMsgs - before
		p.raw, p.lib = append(p.raw, t1.Sub(t0)), append(p.lib, t2.Sub(t1))
		b.StopTimer()
		if err := raw.Delete(ctx, "slot", jetstream.LastRevision(rev)); err != nil {
			b.Fatal(err)
		}
		if err := m.Close(ctx, s, "success"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	p.report(b, msgs)
}

func BenchmarkCommitVsRawUpdate(b *testing.B) {
	ctx := context.Background()
	m, raw := benchEnv(b, false)
	s, err := m.Join(ctx, "slot", "T", session.WithTTL(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	rev, err := raw.Create(ctx, "slot", record)
	if err != nil {
		b.Fatal(err)
	}
	var p pair
	var msgs uint64
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if rev, err = raw.Update(ctx, "slot", record, rev); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		before := m.Bucket().Client().Conn().Stats().OutMsgs
		if s, err = m.Commit(ctx, s, ""); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		msgs += m.Bucket().Client().Conn().Stats().OutMsgs - before
		p.raw, p.lib = append(p.raw, t1.Sub(t0)), append(p.lib, t2.Sub(t1))
	}
	p.report(b, msgs)
}

func BenchmarkCloseVsRawDelete(b *testing.B) {
	ctx := context.Background()
	m, raw := benchEnv(b, false)
	var p pair
	var msgs uint64
	for i := range b.N {
		b.StopTimer()
		key := fmt.Sprintf("k%d", i)
		rev, err := raw.Create(ctx, key, record)
		if err != nil {
			b.Fatal(err)
		}
		s, err := m.Join(ctx, key, "T", session.WithTTL(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := raw.Delete(ctx, key, jetstream.LastRevision(rev)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		before := m.Bucket().Client().Conn().Stats().OutMsgs
		if err := m.Close(ctx, s, "success"); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		msgs += m.Bucket().Client().Conn().Stats().OutMsgs - before
		p.raw, p.lib = append(p.raw, t1.Sub(t0)), append(p.lib, t2.Sub(t1))
	}
	p.report(b, msgs)
}

// BenchmarkListVsRawWatch lists 20k sessions (what `baton status` reads)
// against nats.go's WatchAll of the same bucket counting the entries it
// delivers (the raw listing: no decoding, nothing kept), alternating.
func BenchmarkListVsRawWatch(b *testing.B) {
	const n = 20000
	ctx := context.Background()
	m, _ := benchEnv(b, false)
	js, err := jetstream.New(m.Bucket().Client().Conn())
	if err != nil {
		b.Fatal(err)
	}
	bucket := session.BucketConfig("baton", 1).Name
	raw, err := js.KeyValue(ctx, bucket)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		key := fmt.Sprintf("s%06d", i)
		rec := session.Record{Slot: key, TaskID: "T", Host: "h1", PID: 123456, PIDStart: "22dfbb72-a18f-46a8-b78a-306df6e6b7a6:155166",
			Instance: "308c17ab-d396-4d55-ac0f-8efe4e682a8d", Fence: uint64(i + 1), StartedAt: time.Now().UTC(), RenewedAt: time.Now().UTC()}
		data, _ := json.Marshal(rec)
		if _, err := js.PublishAsync("$KV."+bucket+"."+key, data); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("storing the sessions took over a minute")
	}
	var p pair
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		w, err := raw.WatchAll(ctx, jetstream.IgnoreDeletes())
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for e := range w.Updates() {
			if e == nil {
				break
			}
			got++
		}
		_ = w.Stop()
		t1 := time.Now()
		l, err := m.List(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if got != n || len(l.Sessions) != n {
			b.Fatalf("raw watch saw %d, List %d sessions (%d undecodable); want %d", got, len(l.Sessions), len(l.Undecodable), n)
		}
		p.raw, p.lib = append(p.raw, t1.Sub(t0)), append(p.lib, t2.Sub(t1))
	}
	p.report(b, 0)
}
