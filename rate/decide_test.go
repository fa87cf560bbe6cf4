package rate

import (
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	perSec := func(max, burst int64) Limit {
		return Limit{Max: max, Burst: burst, Period: Duration(time.Second), Per: PerCost}
	}
	rec := func(lim []Limit, log []Take, last *Take) Limiter {
		return Limiter{Name: "r", Limits: lim, Log: log, Last: last}
	}
	for _, tc := range []struct {
		name    string
		rec     Limiter
		recTime time.Time
		d       time.Time
		cost    int64
		ok      bool
		wait    time.Duration
		logLen  int
	}{
		{"empty", rec([]Limit{perSec(3, 0)}, nil, nil), at(0), at(0), 1, true, 0, 0},
		{"fits beside two", rec([]Limit{perSec(3, 0)}, []Take{{ID: "a", Cost: 1, At: at(100)}}, &Take{ID: "b", Cost: 1}), at(200), at(200), 1, true, 0, 2},
		{"full until the oldest leaves", rec([]Limit{perSec(2, 0)}, []Take{{ID: "a", Cost: 1, At: at(100)}}, &Take{ID: "b", Cost: 1}), at(200), at(300), 1, false, 800 * time.Millisecond, 0},
		{"the burst is room", rec([]Limit{perSec(2, 1)}, []Take{{ID: "a", Cost: 1, At: at(100)}}, &Take{ID: "b", Cost: 1}), at(200), at(300), 1, true, 0, 2},
		{"old takes leave the window and the log", rec([]Limit{perSec(2, 0)}, []Take{{ID: "a", Cost: 1, At: at(100)}}, &Take{ID: "b", Cost: 1}), at(200), at(1150), 1, true, 0, 1},
		{"a costly take waits for two to leave", rec([]Limit{perSec(10, 0)}, []Take{{ID: "a", Cost: 4, At: at(100)}, {ID: "b", Cost: 4, At: at(300)}}, &Take{ID: "c", Cost: 1}), at(400), at(500), 6, false, 800 * time.Millisecond, 0},
		{"takes are counted, not their cost", rec([]Limit{{Max: 2, Period: Duration(time.Second), Per: PerTake}}, []Take{{ID: "a", Cost: 100, At: at(100)}}, nil), at(100), at(200), 500, true, 0, 1},
		{"the tighter of two limits refuses", rec([]Limit{perSec(100, 0), {Max: 1, Period: Duration(time.Second), Per: PerTake}}, nil, &Take{ID: "a", Cost: 1}), at(100), at(200), 1, false, 900 * time.Millisecond, 0},
	} {
		ok, next, wait := decide(tc.rec, tc.recTime, tc.d, tc.cost, "x")
		if ok != tc.ok || wait != tc.wait {
			t.Errorf("%s: admitted %v, wait %s; want %v, %s", tc.name, ok, wait, tc.ok, tc.wait)
			continue
		}
		if ok && (len(next.Log) != tc.logLen || next.Last == nil || next.Last.ID != "x" || next.Last.Cost != tc.cost) {
			t.Errorf("%s: next record %+v; want %d in the log and x last", tc.name, next, tc.logLen)
		}
	}
}
