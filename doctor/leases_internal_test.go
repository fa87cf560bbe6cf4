package doctor

import (
	"testing"
	"time"

	"github.com/batonhq/baton/lease"
)

// The lease findings at a given server time: the server removes expired
// keys within a second, so an expired lease still listed is caught here
// with a chosen time.
func TestLeaseFindings(t *testing.T) {
	written := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := func(key, holder string) *lease.Info {
		return &lease.Info{Record: lease.Record{Key: key, Holder: holder, Fence: 3}, Revision: 3, Written: written, TTL: 10 * time.Second}
	}
	c := &Checker{}
	cands := map[string]bool{lease.CandidateKey("bot", "i1"): true}
	for _, tc := range []struct {
		name  string
		lease *lease.Info
		at    time.Duration
		want  []string
	}{
		{"fresh", in("job", "i1"), time.Second, nil},
		{"stale after half its TTL", in("job", "i1"), 6 * time.Second, []string{KindStale}},
		{"expired a moment ago: the server's next tick removes it", in("job", "i1"), 10*time.Second + 500*time.Millisecond, nil},
		{"expired but still listed", in("job", "i1"), 13 * time.Second, []string{KindExpiredVisible}},
		{"a leader that is a candidate", in("leader.bot", "i1"), time.Second, nil},
		{"a leader late with a renewal is not reaped", in("leader.bot", "i1"), 6 * time.Second, nil},
		{"a leader that is no candidate", in("leader.bot", "i2"), time.Second, []string{KindLeaderWithoutCandidate}},
	} {
		var got []string
		for _, f := range c.leaseFindings(tc.lease, written.Add(tc.at), cands) {
			got = append(got, f.Kind)
		}
		if len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
