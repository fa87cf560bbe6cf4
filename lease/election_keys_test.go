package lease_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton/lease"
)

// The candidacies of the agent key chat.eu lie under candidate.chat., where
// the election of chat watches its own: they are not its candidates, and
// its leader is never asked to hand over to one.
func TestElection_TheCandidatesOfALongerKeyAreNotItsOwn(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	elect := func(key, instance string, opts ...lease.ElectionOption) *lease.Election {
		el, err := e.leases(instance, "h1").Election(key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { el.Withdraw(context.Background()) })
		return el
	}
	chat := elect("chat", "inst-a", lease.Score(1))
	ta := waitTerm(t, campaign(ctx, t, chat), 5*time.Second)
	teu := waitTerm(t, campaign(ctx, t, elect("chat.eu", "inst-eu", lease.Score(100))), 5*time.Second)
	bestTerm := campaign(ctx, t, elect("chat", "inst-best", lease.Score(5)))

	select {
	case to := <-ta.Yield():
		if to != "inst-best" {
			t.Fatalf("the leader of chat was asked to hand over to %s, want inst-best", to)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no handover to the better candidate")
	}
	cs, err := chat.Candidates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Instance)
	}
	if !slices.Equal(names, []string{"inst-best", "inst-a"}) {
		t.Errorf("candidates of chat = %q, want inst-best and inst-a", names)
	}
	if err := ta.HandOver(ctx, "inst-best"); err != nil {
		t.Fatal(err)
	}
	waitTerm(t, bestTerm, 5*time.Second).Release(ctx)
	teu.Release(ctx)
}
