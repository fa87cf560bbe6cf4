package lease_test

import (
	"testing"

	"github.com/batonhq/baton/lease"
)

func TestAgentKeyOf_TellsLeadersCandidaciesAndPlainLeasesApart(t *testing.T) {
	for _, c := range []struct {
		key, holder, agent string
		leader, cand       bool
	}{
		{lease.LeaderKey("chat"), "i1", "chat", true, false},
		{lease.LeaderKey("chat.eu"), "", "chat.eu", true, false},
		{lease.CandidateKey("chat", "i1"), "i1", "chat", false, true},
		{lease.CandidateKey("chat.eu", "i1"), "i1", "chat.eu", false, true},
		{lease.CandidateKey("chat", "i1"), "i2", "", false, false}, // not its holder's candidacy
		{lease.CandidateKey("chat", "i1"), "", "", false, false},
		{"candidate.i1", "i1", "", false, false},
		{"deploy", "i1", "", false, false},
	} {
		agent, leader, cand := lease.AgentKeyOf(c.key, c.holder)
		if agent != c.agent || leader != c.leader || cand != c.cand {
			t.Errorf("AgentKeyOf(%q, %q) = %q, %v, %v; want %q, %v, %v", c.key, c.holder, agent, leader, cand, c.agent, c.leader, c.cand)
		}
	}
}
