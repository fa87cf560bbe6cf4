package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
)

// handoverSide hands leadership from one of two contenders to the other.
type handoverSide struct {
	// follow starts the current follower's campaign; its channel yields
	// when the follower leads.
	follow func(ctx context.Context) <-chan followed
	// waiting reports whether the follower is registered and waiting.
	waiting func(ctx context.Context) (bool, error)
	// resign ends the current leader's term; the follower becomes leader.
	resign func(ctx context.Context) error
	// settle is how long the follower gets, once registered, to be waiting
	// on its watch before the leader resigns.
	settle time.Duration
	lat    samples
}

// followed is a follower's campaign returning: when, and how.
type followed struct {
	at  time.Time
	err error
}

// campaign runs fn and reports when it returned.
func campaign(fn func() error) <-chan followed {
	done := make(chan followed, 1)
	go func() {
		err := fn()
		done <- followed{at: time.Now(), err: err}
	}()
	return done
}

// handoverRows: the leader resigns while the other contender campaigns;
// the time from the resignation to the follower's campaign returning.
// baton: Term.Resign (a handover to the best candidate). etcd:
// Election.Resign. Floor: a raw KV delete that a watcher of the key turns
// into its own create.
func (b *bench) handoverRows(ctx context.Context) ([]row, error) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var sides []*handoverSide
	var cleanups []func()
	defer func() {
		for _, f := range cleanups {
			f()
		}
	}()

	// baton: two processes' worth of clients, as two hosts.
	var els [2]*lease.Election
	for i := range els {
		c, err := kv.Connect(ctx, kv.WithURL(b.nats.url))
		if err != nil {
			return nil, err
		}
		cleanups = append(cleanups, c.Close)
		ls, err := lease.New(c, lease.WithInstance(fmt.Sprintf("ho-%d", i)), lease.WithHostID(fmt.Sprintf("ho-host-%d", i)))
		if err != nil {
			return nil, err
		}
		if els[i], err = ls.Election("ho-"+run, lease.ElectTTL(10*time.Second)); err != nil {
			return nil, err
		}
		el := els[i]
		cleanups = append(cleanups, func() { _ = el.Withdraw(context.WithoutCancel(ctx)) })
	}
	term, err := els[0].Campaign(ctx)
	if err != nil {
		return nil, err
	}
	cur := 0
	var next *lease.Term
	sides = append(sides, &handoverSide{
		follow: func(ctx context.Context) <-chan followed {
			return campaign(func() (err error) {
				next, err = els[1-cur].Campaign(ctx)
				return err
			})
		},
		waiting: func(ctx context.Context) (bool, error) {
			cs, err := els[0].Candidates(ctx)
			return len(cs) == 2, err
		},
		resign: func(ctx context.Context) error { return term.Resign(ctx) },
		settle: 20 * time.Millisecond,
	})
	batonSwap := func() { term, cur = next, 1-cur }

	// floor: a raw key; the follower watches it and creates it once gone.
	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url))
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, c.Close)
	kvb, err := floorBucket(ctx, c, "floor-handover")
	if err != nil {
		return nil, err
	}
	fkey := "ho-" + run
	frev, err := kvb.Create(ctx, fkey, []byte("leader"))
	if err != nil {
		return nil, err
	}
	watching := make(chan struct{}, 1)
	sides = append(sides, &handoverSide{
		follow: func(ctx context.Context) <-chan followed {
			return campaign(func() error {
				w, err := kvb.Watch(ctx, fkey)
				if err != nil {
					return err
				}
				defer w.Stop()
				for e := range w.Updates() {
					if e == nil {
						watching <- struct{}{}
						continue
					}
					if e.Operation() != jetstream.KeyValuePut {
						frev, err = kvb.Create(ctx, fkey, []byte("leader"))
						return err
					}
				}
				return fmt.Errorf("watch of %s ended", fkey)
			})
		},
		waiting: func(context.Context) (bool, error) {
			select {
			case <-watching:
				return true, nil
			default:
				return false, nil
			}
		},
		resign: func(ctx context.Context) error { return kvb.Delete(ctx, fkey, jetstream.LastRevision(frev)) },
		settle: 20 * time.Millisecond,
	})

	// etcd: two clients with a session each.
	var eels [2]*concurrency.Election
	ec, err := etcdClient(b.etcd.endpoint, nil)
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { ec.Close() })
	for i := range eels {
		c, err := etcdClient(b.etcd.endpoint, nil)
		if err != nil {
			return nil, err
		}
		cleanups = append(cleanups, func() { c.Close() })
		s, err := concurrency.NewSession(c, concurrency.WithTTL(10))
		if err != nil {
			return nil, err
		}
		cleanups = append(cleanups, func() { s.Close() })
		eels[i] = concurrency.NewElection(s, "/ho-"+run)
	}
	if err := eels[0].Campaign(ctx, "e0"); err != nil {
		return nil, err
	}
	ecur := 0
	sides = append(sides, &handoverSide{
		follow: func(ctx context.Context) <-chan followed {
			return campaign(func() error { return eels[1-ecur].Campaign(ctx, fmt.Sprintf("e%d", 1-ecur)) })
		},
		waiting: func(ctx context.Context) (bool, error) {
			r, err := ec.Get(ctx, "/ho-"+run+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			return err == nil && r.Count == 2, err
		},
		resign: func(ctx context.Context) error { return eels[ecur].Resign(ctx) },
		// Campaign waits on a watch from a past revision, which etcd serves
		// from its unsynced set until a loop that runs every 100 ms catches
		// it up: only after that does the follower hear a resignation at once.
		settle: 150 * time.Millisecond,
	})
	swaps := []func(){batonSwap, func() {}, func() { ecur = 1 - ecur }}

	for i := range b.handovers {
		for _, si := range order(i, len(sides)) {
			s := sides[si]
			done := s.follow(ctx)
			if err := waitFor(ctx, 10*time.Second, func() (bool, error) { return s.waiting(ctx) }); err != nil {
				return nil, fmt.Errorf("%s follower: %w", sideNames[si], err)
			}
			// The follower registers before it starts waiting on the watch.
			time.Sleep(s.settle)
			t0 := time.Now()
			if err := s.resign(ctx); err != nil {
				return nil, fmt.Errorf("%s resign: %w", sideNames[si], err)
			}
			select {
			case f := <-done:
				if f.err != nil {
					return nil, fmt.Errorf("%s campaign: %w", sideNames[si], f.err)
				}
				// Until the follower leads, not until the resignation returns
				// (baton's waits to see the new leader take the lease).
				s.lat = append(s.lat, f.at.Sub(t0))
			case <-time.After(opTimeout):
				return nil, fmt.Errorf("%s: the follower did not lead within %s of the resignation", sideNames[si], opTimeout)
			}
			swaps[si]()
		}
	}
	_ = term.Resign(context.WithoutCancel(ctx))
	return []row{
		{metric: "handover_graceful (resign) median", unit: unitDuration,
			baton: dur(sides[0].lat.median()), floor: dur(sides[1].lat.median()), etcd: dur(sides[2].lat.median()),
			goal: []cond{toFloorAtMost(1.2)}},
		{metric: "handover_graceful (resign) " + tail(b.handovers), unit: unitDuration,
			baton: dur(sides[0].lat.p99()), floor: dur(sides[1].lat.p99()), etcd: dur(sides[2].lat.p99())},
	}, nil
}
