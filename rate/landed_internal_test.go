package rate

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/kv/kvtest"
)

// A take whose write landed though its answer was lost, and whose retry
// then met another revision, is admitted once: the retry finds its id in
// the record and writes nothing (the fault suite saw a take admitted by
// two revisions).
func TestTake_ALandedWriteIsNotAdmittedTwice(t *testing.T) {
	s := kvtest.StartServer(t)
	ls, err := New(kvtest.Connect(t, s.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ls.Ensure(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Create(ctx, "api", []Limit{{Max: 10, Period: Duration(time.Minute), Per: PerTake}}); err != nil {
		t.Fatal(err)
	}
	before, err := ls.get(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	// The take's first write, as if its answer was lost: it landed.
	landed, err := ls.Take(ctx, "api", WithID("t-1"))
	if err != nil {
		t.Fatal(err)
	}
	// The retry, from the record as the take first read it: its
	// compare-and-set loses to the write that landed.
	a, _, err := ls.take(ctx, "api", seen{e: before, exact: true}, time.Time{}, takeConfig{cost: 1, id: "t-1"})
	if err != nil {
		t.Fatal(err)
	}
	after, err := ls.get(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	if after.Revision != landed.Revision || a.Revision != landed.Revision {
		t.Fatalf("the retry wrote revision %d (record at %d, landed at %d): it admitted the take again", a.Revision, after.Revision, landed.Revision)
	}
}
