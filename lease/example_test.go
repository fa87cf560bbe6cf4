package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
)

// startServer starts a nats-server with JetStream on a free loopback port,
// its store in a temporary directory, for an example. It returns the
// server's URL and stop, which shuts the server down and removes the store.
func startServer() (url string, stop func()) {
	dir, err := os.MkdirTemp("", "baton-example-")
	if err != nil {
		log.Fatal(err)
	}
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		log.Fatal("nats-server not ready")
	}
	return ns.ClientURL(), func() {
		ns.Shutdown()
		ns.WaitForShutdown()
		os.RemoveAll(dir)
	}
}

// A lease has one holder at a time. Contention is a value: TryAcquire
// of a held lease is ErrHeld, naming the holder. Once released, the next
// holder gets a larger fence.
func ExampleLeases_TryAcquire() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := kv.Connect(ctx, kv.WithURL(url))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// Two instances (processes, as far as leases can tell) of one client.
	a, err := lease.New(c, lease.WithInstance("worker-a"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := lease.New(c, lease.WithInstance("worker-b"))
	if err != nil {
		log.Fatal(err)
	}
	// Once per deployment: create the leases bucket, on one server.
	if err := a.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}

	l, err := a.TryAcquire(ctx, "db-migrate", lease.WithTTL(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a holds", l.Key(), "with a fence:", l.Fence() > 0)

	_, err = b.TryAcquire(ctx, "db-migrate")
	var held *lease.HeldError
	if errors.Is(err, lease.ErrHeld) && errors.As(err, &held) {
		fmt.Println("b refused: held by", held.Holder.Holder)
	}

	// The lease renews itself every third of its TTL until it is released;
	// Renew renews it now.
	if err := l.Renew(ctx); err != nil {
		log.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", errors.Is(l.Err(), lease.ErrReleased))

	lb, err := b.TryAcquire(ctx, "db-migrate")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("b holds it, larger fence:", lb.Fence() > l.Fence())
	if err := lb.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// a holds db-migrate with a fence: true
	// b refused: held by worker-a
	// released: true
	// b holds it, larger fence: true
}

// Acquire waits while another instance holds the lease; the watch of the
// lease wakes it the moment the holder lets go.
func ExampleLeases_Acquire() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := kv.Connect(ctx, kv.WithURL(url))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	a, err := lease.New(c, lease.WithInstance("worker-a"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := lease.New(c, lease.WithInstance("worker-b"))
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}

	la, err := a.TryAcquire(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	got := make(chan *lease.Lease)
	go func() {
		// Waits until a lets go, or the context ends.
		lb, err := b.Acquire(ctx, "nightly-report")
		if err != nil {
			log.Fatal(err)
		}
		got <- lb
	}()

	fmt.Println("a works, then releases")
	if err := la.Release(ctx); err != nil {
		log.Fatal(err)
	}
	lb := <-got
	fmt.Println("b acquired, larger fence:", lb.Fence() > la.Fence())
	if err := lb.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// a works, then releases
	// b acquired, larger fence: true
}

// Holding a lease is not proof of holding it: a holder paused past its TTL
// (GC, SIGSTOP, a suspended laptop) acts before it notices the lease is
// gone. The fence is what makes that safe: the resource refuses a fence
// lower than the highest it has seen.
func ExampleLease_Fence() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := kv.Connect(ctx, kv.WithURL(url))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	a, err := lease.New(c, lease.WithInstance("worker-a"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := lease.New(c, lease.WithInstance("worker-b"))
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}

	// A resource that work under the lease writes to. It refuses a fence
	// lower than the highest it has seen, so a former holder cannot
	// overwrite its successor.
	var highest uint64
	var value string
	write := func(fence uint64, v string) error {
		if fence < highest {
			return errors.New("stale fence")
		}
		highest, value = fence, v
		return nil
	}

	// a's lease is not renewed in the background: as if a were paused,
	// it expires after its TTL.
	la, err := a.TryAcquire(ctx, "config", lease.WithTTL(time.Second), lease.WithoutKeepAlive())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a writes:", write(la.Fence(), "from a"))

	// b waits for the lease and gets it once a's expired, with a larger
	// fence.
	lb, err := b.Acquire(ctx, "config")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("b writes:", write(lb.Fence(), "from b"))

	// a wakes up and writes before it notices: refused.
	fmt.Println("a writes:", write(la.Fence(), "late from a"))
	fmt.Println("resource holds:", value)

	// a's next renewal tells it the lease is lost.
	fmt.Println("a renews, lost:", errors.Is(la.Renew(ctx), lease.ErrLost))
	if err := lb.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// a writes: <nil>
	// b writes: <nil>
	// a writes: stale fence
	// resource holds: from b
	// a renews, lost: true
}

// Campaign waits until this instance leads. Term.Resign hands leadership to
// the best other candidate, with no moment without a leader; the new
// leader's fence is larger.
func ExampleElection_Campaign() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := kv.Connect(ctx, kv.WithURL(url))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	a, err := lease.New(c, lease.WithInstance("worker-a"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := lease.New(c, lease.WithInstance("worker-b"))
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}

	// Every instance that shares the agent key "reviewer" campaigns.
	ea, err := a.Election("reviewer")
	if err != nil {
		log.Fatal(err)
	}
	defer ea.Withdraw(ctx)
	eb, err := b.Election("reviewer")
	if err != nil {
		log.Fatal(err)
	}
	defer eb.Withdraw(ctx)

	ta, err := ea.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a leads with a fence:", ta.Fence() > 0)

	// b campaigns too, and waits: it is woken by the watch of the leader's
	// lease, not by polling.
	bLeads := make(chan *lease.Term)
	go func() {
		tb, err := eb.Campaign(ctx)
		if err != nil {
			log.Fatal(err)
		}
		bLeads <- tb
	}()
	// Wait until b's candidacy is registered, so that a can hand over to it.
	for cs, _ := ea.Candidates(ctx); len(cs) < 2; cs, _ = ea.Candidates(ctx) {
		time.Sleep(10 * time.Millisecond)
	}

	// A leader works until it resigns or its term's Done closes (lost).
	// Stop the work, then resign.
	if err := ta.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	tb := <-bLeads
	leader, err := ea.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", leader.Holder, "larger fence:", tb.Fence() > ta.Fence())
	if err := tb.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// a leads with a fence: true
	// leader: worker-b larger fence: true
}

// Observe streams every change of leadership in order, from any process
// (a dashboard, an operator): the current state first, then each new
// leader and each moment without one.
func ExampleElection_Observe() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := kv.Connect(ctx, kv.WithURL(url))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	a, err := lease.New(c, lease.WithInstance("worker-a"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := lease.New(c, lease.WithInstance("worker-b"))
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}

	watcher, err := lease.New(c, lease.WithInstance("dashboard"))
	if err != nil {
		log.Fatal(err)
	}
	ew, err := watcher.Election("reviewer")
	if err != nil {
		log.Fatal(err)
	}
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	changes, err := ew.Observe(octx)
	if err != nil {
		log.Fatal(err)
	}
	next := func() {
		o := <-changes
		switch {
		case o.Leader != nil:
			fmt.Println("leader:", o.Leader.Holder)
		case o.How != "":
			fmt.Printf("no leader (%s)\n", o.How)
		default:
			fmt.Println("no leader")
		}
	}
	next() // the current state

	for _, ls := range []*lease.Leases{a, b} {
		e, err := ls.Election("reviewer")
		if err != nil {
			log.Fatal(err)
		}
		t, err := e.Campaign(ctx)
		if err != nil {
			log.Fatal(err)
		}
		next()
		// Release gives the term up with no handover: a moment without a
		// leader, until the next campaign.
		if err := t.Release(ctx); err != nil {
			log.Fatal(err)
		}
		next()
		if err := e.Withdraw(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// no leader
	// leader: worker-a
	// no leader (released)
	// leader: worker-b
	// no leader (released)
}

// Any process can ask the leader to hand leadership to a named candidate.
// The leader hears it on Term.Yield, stops its work and calls HandOver:
// one compare-and-set, with no moment without a leader.
func ExampleTerm_HandOver() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := kv.Connect(ctx, kv.WithURL(url))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	a, err := lease.New(c, lease.WithInstance("worker-a"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := lease.New(c, lease.WithInstance("worker-b"))
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}

	ea, err := a.Election("reviewer")
	if err != nil {
		log.Fatal(err)
	}
	defer ea.Withdraw(ctx)
	eb, err := b.Election("reviewer")
	if err != nil {
		log.Fatal(err)
	}
	defer eb.Withdraw(ctx)
	ta, err := ea.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	bLeads := make(chan *lease.Term)
	go func() {
		tb, err := eb.Campaign(ctx)
		if err != nil {
			log.Fatal(err)
		}
		bLeads <- tb
	}()
	for cs, _ := ea.Candidates(ctx); len(cs) < 2; cs, _ = ea.Candidates(ctx) {
		time.Sleep(10 * time.Millisecond)
	}

	// An operator asks for worker-b (as `baton leader transfer` does).
	operator, err := lease.New(c, lease.WithInstance("operator"))
	if err != nil {
		log.Fatal(err)
	}
	eo, err := operator.Election("reviewer")
	if err != nil {
		log.Fatal(err)
	}
	if err := eo.RequestTransfer(ctx, "worker-b"); err != nil {
		log.Fatal(err)
	}

	// The leader's loop: work until asked to yield (or until Done closes).
	select {
	case to := <-ta.Yield():
		fmt.Println("a is asked to hand over to", to)
		if err := ta.HandOver(ctx, to); err != nil {
			log.Fatal(err)
		}
	case <-ta.Done():
		log.Fatal(ta.Err())
	}
	tb := <-bLeads
	fmt.Println("b leads, larger fence:", tb.Fence() > ta.Fence())
	if err := tb.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// a is asked to hand over to worker-b
	// b leads, larger fence: true
}
