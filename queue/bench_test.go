package queue

import (
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// BenchmarkView_WatchEntries feeds a worker's view the watch entries of
// 2000 tasks' lives as other workers write them (added; lock, token,
// active; done, the lock's tombstone, the token's): what every worker of a
// queue does for every task. ns/entry is per entry.
func BenchmarkView_WatchEntries(b *testing.B) {
	cfg := DefaultConfig("q")
	cfg.MaxActive = 16
	now := time.Date(2026, 11, 26, 4, 5, 6, 789, time.UTC)
	var rev uint64
	next := func() uint64 { rev++; return rev }
	type entry struct {
		queue bool // of the queue's watch, else of the sessions'
		e     kv.Entry
	}
	var entries []entry
	const n = 2000
	for i := range n {
		id := fmt.Sprintf("t%06d", i)
		d, _ := encodeTask(&Task{ID: id, Queue: "q", Key: fmt.Sprintf("k%04d", i%1000), Priority: Normal, State: StatePending, AddedAt: now, UpdatedAt: now})
		entries = append(entries, entry{true, kv.Entry{Key: taskKey("q", id), Value: d, Revision: next(), Created: now}})
	}
	for i := range n {
		id, key, tok := fmt.Sprintf("t%06d", i), fmt.Sprintf("k%04d", i%1000), i%16
		lock := next()
		sr := session.Record{Slot: key, TaskID: id, AgentID: "queue q", Host: "elsewhere", PID: 9, PIDStart: "b:1", Instance: "other",
			StartedAt: now, RenewedAt: now, Meta: map[string]string{"queue": "q", "task": id, "attempt": "1"}}
		sd, _ := sr.MarshalJSON()
		entries = append(entries, entry{false, kv.Entry{Key: key, Value: sd, Revision: lock, Created: now, TTL: 30 * time.Second}})
		td, _ := (&token{Queue: "q", Index: tok, Task: id, Key: key, Slot: key, Fence: lock, Host: "elsewhere", PID: 9, PIDStart: "b:1",
			Instance: "other", Acquired: now, Renewed: now}).encode()
		entries = append(entries, entry{true, kv.Entry{Key: tokenKey("q", tok), Value: td, Revision: next(), Created: now, TTL: 30 * time.Second}})
		active := &Task{ID: id, Queue: "q", Key: key, Priority: Normal, State: StateActive, Attempts: 1, Seq: uint64(i + 1), AddedAt: now, UpdatedAt: now,
			Run: &Run{Attempt: 1, Slot: key, Fence: lock, Token: tok, Host: "elsewhere", PID: 9, PIDStart: "b:1", Instance: "other", StartedAt: now}}
		ad, _ := encodeTask(active)
		entries = append(entries, entry{true, kv.Entry{Key: taskKey("q", id), Value: ad, Revision: next(), Created: now}})
		code := 0
		dd, _ := encodeTask(settle(cfg, active, outcome{reason: ReasonExit, exitCode: &code}, now))
		done := next()
		entries = append(entries, entry{true, kv.Entry{Key: taskKey("q", id), Value: dd, Revision: done, Created: now, TTL: time.Hour}})
		sr.Fence, sr.Result, sr.Meta[metaEnded] = lock, session.ResultSuccess, fmt.Sprint(done)
		nd, _ := sr.MarshalJSON()
		entries = append(entries, entry{false, kv.Entry{Key: key, Value: nd, Revision: next(), Op: kv.OpDelete, Created: now}})
		entries = append(entries, entry{true, kv.Entry{Key: tokenKey("q", tok), Revision: next(), Op: kv.OpDelete, Created: now}})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		x := newIndex("q", cfg)
		x.myHost, x.myPID = "here", 1
		x.markSynced(0)
		b.StartTimer()
		for _, e := range entries {
			if e.queue {
				x.applyQueue(e.e, now)
			} else {
				x.applySession(e.e, now)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(entries)), "ns/entry")
	b.ReportMetric(0, "ns/op")
}
