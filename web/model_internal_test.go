package web

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
)

func leaderEvent(kind lease.EventKind, holder, prev string, fence uint64, at time.Time) lease.Event {
	ev := lease.Event{Kind: kind, Key: "leader.bot", Time: at, Revision: fence}
	if holder != "" {
		ev.Lease = &lease.Info{Record: lease.Record{Key: "leader.bot", Holder: holder, Host: "h-" + holder, Fence: fence, PrevHolder: prev}, Written: at, TTL: 3 * time.Second}
	}
	return ev
}

func TestModel_LeadershipChangesCarryTheirReason(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var kinds []string
	md := newModel(func() time.Time { return t0 }, func(kind, key string) { kinds = append(kinds, kind+":"+key) })
	md.applyLease(leaderEvent(lease.EventPresent, "a", "", 1, at(0)))
	md.applyLease(lease.Event{Kind: lease.EventSynced})
	md.applyLease(leaderEvent(lease.EventRenew, "a", "", 1, at(1)))
	md.applyLease(lease.Event{Kind: lease.EventExpire, Key: "leader.bot", Time: at(5), Lease: leaderEvent(lease.EventRenew, "a", "", 1, at(1)).Lease})
	v, _ := md.Agent("bot")
	if v.Leader != nil || v.LeaderlessMS != 0 && md.agents["bot"].leaderless != at(5) {
		t.Fatalf("after expiry: %+v, want no leader since 5s", v)
	}
	md.applyLease(leaderEvent(lease.EventAcquire, "b", "", 7, at(6)))
	md.applyLease(leaderEvent(lease.EventAcquire, "c", "b", 9, at(7))) // a handover
	md.applyLease(leaderEvent(lease.EventAcquire, "d", "", 11, at(8))) // same-host takeover of c
	md.applyLease(lease.Event{Kind: lease.EventRelease, Key: "leader.bot", Time: at(9)})
	md.applyLease(leaderEvent(lease.EventAcquire, "e", "", 13, at(10)))
	v, _ = md.Agent("bot")
	want := []Change{
		{Time: at(5), From: "a", Reason: ReasonExpiry},
		{Time: at(6), From: "a", To: "b", Host: "h-b", Fence: 7, Reason: ReasonExpiry},
		{Time: at(7), From: "b", To: "c", Host: "h-c", Fence: 9, Reason: ReasonTransfer},
		{Time: at(8), From: "c", To: "d", Host: "h-d", Fence: 11, Reason: ReasonTakeover},
		{Time: at(9), From: "d", Reason: ReasonResign},
		{Time: at(10), From: "d", To: "e", Host: "h-e", Fence: 13, Reason: ReasonResign},
	}
	if len(v.Changes) != len(want) {
		t.Fatalf("changes %+v, want %+v", v.Changes, want)
	}
	for i := range want {
		if v.Changes[i] != want[i] {
			t.Errorf("change %d = %+v, want %+v", i, v.Changes[i], want[i])
		}
	}
	a := md.agents["bot"]
	if a.counts[ReasonExpiry] != 1 || a.counts[ReasonTransfer] != 1 || a.counts[ReasonTakeover] != 1 || a.counts[ReasonResign] != 1 {
		t.Errorf("counts %v: one new leader per reason", a.counts)
	}
	if v.Leader["holder"] != "e" || !a.leaderless.IsZero() {
		t.Errorf("leader %v, leaderless %v; want e, led", v.Leader["holder"], a.leaderless)
	}
	for i := 0; i < maxChanges+5; i++ {
		md.applyLease(leaderEvent(lease.EventAcquire, string(rune('f'+i%2)), "", uint64(20+i), at(20+i)))
	}
	if n := len(md.agents["bot"].changes); n != maxChanges {
		t.Errorf("%d changes kept, want the last %d", n, maxChanges)
	}
}

func TestModel_CandidaciesComeAndGoByKey(t *testing.T) {
	md := newModel(time.Now, nil)
	cand := func(kind lease.EventKind, inst string) lease.Event {
		ev := lease.Event{Kind: kind, Key: lease.CandidateKey("chat.eu", inst), Time: time.Now()}
		if kind != lease.EventExpire && kind != lease.EventRelease {
			ev.Lease = &lease.Info{Record: lease.Record{Key: ev.Key, Holder: inst}, TTL: time.Second, Written: time.Now()}
		}
		return ev
	}
	md.applyLease(cand(lease.EventAcquire, "i1"))
	md.applyLease(cand(lease.EventAcquire, "i2"))
	if a := md.agents["chat.eu"]; a == nil || len(a.cands) != 2 {
		t.Fatalf("agent chat.eu: %+v, want two candidates", a)
	}
	// The record of an expired candidacy is unknown: the key says whose.
	md.applyLease(cand(lease.EventExpire, "i1"))
	md.applyLease(cand(lease.EventRelease, "i2"))
	if a := md.agents["chat.eu"]; a != nil {
		t.Errorf("agent chat.eu with no leader, candidate or history kept: %+v", a)
	}
	if c := md.Counts(0); c.Candidates != 0 || c.AgentKeys != 0 {
		t.Errorf("counts %+v", c)
	}
}

func TestModel_AnUndecodableLeaderIsHeldByNobodyKnowsWhom(t *testing.T) {
	md := newModel(time.Now, nil)
	md.applyLease(lease.Event{Kind: lease.EventPresent, Key: "leader.bot", Revision: 4, Time: time.Now(), Err: errors.New("not JSON")})
	md.applyLease(lease.Event{Kind: lease.EventSynced})
	v, err := md.Agent("bot")
	if err != nil || v == nil || v.Leader["holder"] != "?" || v.Leader["undecodable"] != true {
		t.Fatalf("agent %+v, %v: want a leader held by ?", v, err)
	}
	if c := md.Counts(0); c.Leaders != 1 || c.Leaderless != 0 || c.Undecodable != 1 {
		t.Errorf("counts %+v: the key is led, by an undecodable record", c)
	}
	// As baton status lists it: among the leases that do not decode.
	doc, err := md.Status(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	leases := doc["leases"].([]map[string]any)
	if len(leases) != 1 || leases[0]["key"] != "leader.bot" || leases[0]["undecodable"] != true || len(doc["leaders"].([]map[string]any)) != 0 {
		t.Errorf("status leases %v, leaders %v", leases, doc["leaders"])
	}
	// A readable record replaces it.
	md.applyLease(leaderEvent(lease.EventAcquire, "a", "", 5, time.Now()))
	if v, _ := md.Agent("bot"); v.Leader["holder"] != "a" {
		t.Errorf("leader %v, want a", v.Leader)
	}
	if c := md.Counts(0); c.Undecodable != 0 {
		t.Errorf("counts %+v after a readable leader", c)
	}
}

func TestQueues_ObserveTheWaitOfEachClaimSeenOnce(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var waits []time.Duration
	qv := newQueues(nil, nil, func(q string, d time.Duration) {
		if q != "jobs" {
			t.Errorf("observed a wait of queue %q", q)
		}
		waits = append(waits, d)
	})
	entry := func(rev uint64, at time.Time, task queue.Task) kv.Entry {
		task.ID, task.Queue, task.Key, task.Priority = "t1", "jobs", "alice", queue.Normal
		b, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		return kv.Entry{Key: "jobs.task.t1", Value: b, Revision: rev, Created: at, Op: kv.OpPut}
	}
	qv.follow(entry(10, t0, queue.Task{State: queue.StatePending, AddedAt: t0.Add(-time.Hour)}), true)
	// The claim (Run.Claimed 0: this very write) 3s after the add, by the
	// server's clock, not the adder's.
	run := &queue.Run{Attempt: 1, Slot: "alice", Fence: 11}
	qv.follow(entry(11, t0.Add(3*time.Second), queue.Task{State: queue.StateActive, Attempts: 1, Run: run}), true)
	// A rewrite of the running task (its pid, a cancel request) is no
	// second start.
	rewritten := *run
	rewritten.Claimed = 11
	qv.follow(entry(12, t0.Add(4*time.Second), queue.Task{State: queue.StateActive, Attempts: 1, Run: &rewritten}), true)
	if len(waits) != 1 || waits[0] != 3*time.Second {
		t.Errorf("waits observed %v, want one of 3s", waits)
	}
}
