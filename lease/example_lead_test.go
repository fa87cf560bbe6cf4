package lease_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
)

// Three processes run this; one answers at a time. When the leader dies,
// another takes over within the TTL; `baton leader transfer chat-bot --to
// ID` moves leadership with no moment without a leader.
func ExampleElection_Lead() {
	ctx := context.Background()
	c, err := kv.Connect(ctx, kv.WithURL("nats://127.0.0.1:4222"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ls, err := lease.New(c)
	if err != nil {
		log.Fatal(err)
	}
	el, err := ls.Election("chat-bot", lease.ElectTTL(10*time.Second), lease.Grace(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	err = el.Lead(ctx, func(ctx context.Context, t *lease.Term) error {
		// Act only until ctx ends, and send the fence with every write so
		// that the store refuses a former leader's late ones.
		fmt.Printf("leading with fence %d\n", t.Fence())
		<-ctx.Done()
		// Stopped because the term ended: Lead campaigns again. (nil would
		// say the work is finished: Lead would give leadership up and return.)
		return context.Cause(ctx)
	}, lease.OnCampaignRetry(func(err error, wait time.Duration) {
		log.Printf("%v; campaigning again in %s", err, wait)
	}))
	if err != nil {
		log.Fatal(err)
	}
}
