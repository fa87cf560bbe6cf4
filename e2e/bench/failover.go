package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
)

// campaignVerb runs this binary as an etcd campaigner: the etcd side of a
// `baton lead` process.
const campaignVerb = "etcd-campaign"

// etcdCampaignMain: etcd-campaign ENDPOINT PREFIX INSTANCE TTL-SECONDS.
// It campaigns with concurrency.Election on a session of that TTL, says
// "leading" when elected, and holds leadership until killed.
func etcdCampaignMain(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: etcd-campaign ENDPOINT PREFIX INSTANCE TTL-SECONDS")
		return 2
	}
	ttl, err := strconv.Atoi(args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd-campaign:", err)
		return 2
	}
	c, err := etcdClient(args[0], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd-campaign:", err)
		return 1
	}
	s, err := concurrency.NewSession(c, concurrency.WithTTL(ttl))
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd-campaign:", err)
		return 1
	}
	if err := concurrency.NewElection(s, args[1]).Campaign(context.Background(), args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-campaign:", err)
		return 1
	}
	fmt.Println("leading")
	<-s.Done() // killed before this, or the session was lost
	return 1
}

// contender is one side's process that campaigns for leadership.
type contender struct {
	*proc
	instance, host string
}

// failoverSide starts contenders and tells who leads.
type failoverSide struct {
	start func(ctx context.Context, instance, host string) (*contender, error)
	// registered reports whether instance campaigns (is a candidate).
	registered func(ctx context.Context, instance string) (bool, error)
	// leaders yields the instance of each new leader ("" for none).
	leaders <-chan string
}

// crashes kills the leader n times and measures the time from the kill to
// a follower leading. Followers run on another host id than the leader's
// unless sameHost.
func (b *bench) crashes(ctx context.Context, side failoverSide, n int, ttl time.Duration, sameHost bool) (samples, error) {
	hosts := [2]string{"host-a", "host-b"}
	other := func(h string) string {
		if sameHost || h == hosts[1] {
			return hosts[0]
		}
		return hosts[1]
	}
	leader, err := side.start(ctx, "i0", hosts[0])
	if err != nil {
		return nil, err
	}
	defer func() { leader.stop() }()
	if err := waitLeader(ctx, side.leaders, leader.instance, 30*time.Second); err != nil {
		return nil, err
	}
	var out samples
	for i := 1; i <= n; i++ {
		f, err := side.start(ctx, fmt.Sprintf("i%d", i), other(leader.host))
		if err != nil {
			return nil, err
		}
		if err := waitFor(ctx, 30*time.Second, func() (bool, error) { return side.registered(ctx, f.instance) }); err != nil {
			f.kill()
			return nil, fmt.Errorf("follower %s did not register: %w", f.instance, err)
		}
		// The crash falls anywhere in the leader's renewal cycle.
		time.Sleep(rand.N(min(ttl/3, time.Second)))
		t0 := time.Now()
		leader.kill()
		err = waitLeader(ctx, side.leaders, f.instance, ttl+30*time.Second)
		d := time.Since(t0)
		leader = f
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func waitLeader(ctx context.Context, leaders <-chan string, instance string, within time.Duration) error {
	timeout := time.After(within)
	for {
		select {
		case l, ok := <-leaders:
			if !ok {
				return errors.New("leadership observer ended")
			}
			if l == instance {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("%s did not lead within %s", instance, within)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitFor polls cond every 5 ms.
func waitFor(ctx context.Context, within time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("condition not met")
			}
			return fmt.Errorf("after %s: %w", within, err)
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// batonSide is `baton lead` processes on key, observed through the
// library's Election.Observe.
func (b *bench) batonSide(ctx context.Context, c *kv.Client, key string, ttl time.Duration) (failoverSide, error) {
	ls, err := lease.New(c, lease.WithInstance("bench-observer"), lease.WithHostID("bench-observer-host"))
	if err != nil {
		return failoverSide{}, err
	}
	el, err := ls.Election(key)
	if err != nil {
		return failoverSide{}, err
	}
	obs, err := el.Observe(ctx)
	if err != nil {
		return failoverSide{}, err
	}
	leaders := make(chan string)
	go func() {
		defer close(leaders)
		for o := range obs {
			l := ""
			if o.Leader != nil {
				l = o.Leader.Holder
			}
			select {
			case leaders <- l:
			case <-ctx.Done():
				return
			}
		}
	}()
	return failoverSide{
		start: func(ctx context.Context, instance, host string) (*contender, error) {
			cmd := exec.CommandContext(ctx, b.baton, "lead", key, "--ttl", ttl.String(), "--grace", "1s", "--", "sleep", "3600")
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + mkdir(b.shm, "lead-home"), "BATON_URL=" + b.nats.url,
				"BATON_STATE_DIR=" + mkdir(b.shm, "lead-"+host), "BATON_HOST_ID=" + host, "BATON_INSTANCE=" + instance}
			p, err := startLogged("baton lead", cmd, filepath.Join(mkdir(b.work, "lead-logs"), key+"-"+instance+".log"))
			if err != nil {
				return nil, err
			}
			return &contender{proc: p, instance: instance, host: host}, nil
		},
		registered: func(ctx context.Context, instance string) (bool, error) {
			cs, err := el.Candidates(ctx)
			for _, c := range cs {
				if c.Instance == instance {
					return true, nil
				}
			}
			return false, err
		},
		leaders: leaders,
	}, nil
}

// etcdSide is etcd-campaign processes on prefix, observed through
// concurrency.Election.Observe.
func (b *bench) etcdSide(ctx context.Context, ec *clientv3.Client, prefix string, ttl time.Duration) (failoverSide, error) {
	s, err := concurrency.NewSession(ec, concurrency.WithTTL(60))
	if err != nil {
		return failoverSide{}, err
	}
	context.AfterFunc(ctx, func() { s.Close() })
	obs := concurrency.NewElection(s, prefix).Observe(ctx)
	leaders := make(chan string)
	go func() {
		defer close(leaders)
		for r := range obs {
			l := ""
			if len(r.Kvs) > 0 {
				l = string(r.Kvs[0].Value)
			}
			select {
			case leaders <- l:
			case <-ctx.Done():
				return
			}
		}
	}()
	return failoverSide{
		start: func(ctx context.Context, instance, host string) (*contender, error) {
			cmd := exec.CommandContext(ctx, b.self, campaignVerb, b.etcd.endpoint, prefix, instance, strconv.Itoa(int(ttl.Seconds())))
			p, err := startLogged("etcd-campaign", cmd, filepath.Join(mkdir(b.work, "campaign-logs"), instance+".log"))
			if err != nil {
				return nil, err
			}
			return &contender{proc: p, instance: instance, host: host}, nil
		},
		registered: func(ctx context.Context, instance string) (bool, error) {
			r, err := ec.Get(ctx, prefix+"/", clientv3.WithPrefix())
			if err != nil {
				return false, err
			}
			for _, kv := range r.Kvs {
				if string(kv.Value) == instance {
					return true, nil
				}
			}
			return false, nil
		},
		leaders: leaders,
	}, nil
}

// failoverRows: SIGKILL of the leader, the follower on another host id
// (TTL 2 s) and on the same host (TTL 10 s). The floor of a TTL-bound
// failover is the server's expiry of a raw key with that TTL, from its
// write (a leader killed right after renewing).
func (b *bench) failoverRows(ctx context.Context) ([]row, error) {
	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName("bench-failover"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ec, err := etcdClient(b.etcd.endpoint, nil)
	if err != nil {
		return nil, err
	}
	defer ec.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)

	const remoteTTL, sameTTL = 2 * time.Second, 10 * time.Second
	floor, err := ttlExpiry(ctx, c, remoteTTL, b.failoverRemote)
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	var remote, same [2]samples
	b.progress("  baton, another host, TTL %s, %d crashes", remoteTTL, b.failoverRemote)
	bs, err := b.batonSide(ctx, c, "fo-remote-"+run, remoteTTL)
	if err != nil {
		return nil, err
	}
	if remote[0], err = b.crashes(ctx, bs, b.failoverRemote, remoteTTL, false); err != nil {
		return nil, fmt.Errorf("baton remote: %w", err)
	}
	b.progress("  etcd, TTL %s, %d crashes", remoteTTL, b.failoverRemote)
	es, err := b.etcdSide(ctx, ec, "/fo-remote-"+run, remoteTTL)
	if err != nil {
		return nil, err
	}
	if remote[1], err = b.crashes(ctx, es, b.failoverRemote, remoteTTL, false); err != nil {
		return nil, fmt.Errorf("etcd remote: %w", err)
	}
	b.progress("  baton, same host, TTL %s, %d crashes", sameTTL, b.failoverSameHost)
	if bs, err = b.batonSide(ctx, c, "fo-same-"+run, sameTTL); err != nil {
		return nil, err
	}
	if same[0], err = b.crashes(ctx, bs, b.failoverSameHost, sameTTL, true); err != nil {
		return nil, fmt.Errorf("baton same host: %w", err)
	}
	b.progress("  etcd, TTL %s, %d crashes", sameTTL, b.etcdSameHost)
	if es, err = b.etcdSide(ctx, ec, "/fo-same-"+run, sameTTL); err != nil {
		return nil, err
	}
	if same[1], err = b.crashes(ctx, es, b.etcdSameHost, sameTTL, true); err != nil {
		return nil, fmt.Errorf("etcd same host: %w", err)
	}
	return []row{
		{metric: "failover_crash_remote (TTL 2 s) " + tail(b.failoverRemote), unit: unitDuration,
			baton: dur(remote[0].p99()), floor: dur(floor.p99()), etcd: dur(remote[1].p99()),
			goal: []cond{batonAtMost(float64(remoteTTL+400*time.Millisecond), unitDuration)}},
		{metric: "failover_crash_remote (TTL 2 s) median", unit: unitDuration,
			baton: dur(remote[0].median()), floor: dur(floor.median()), etcd: dur(remote[1].median())},
		{metric: "failover_crash_same_host (TTL 10 s) " + tail(b.failoverSameHost), unit: unitDuration,
			baton: dur(same[0].p99()), floor: missing("—"), etcd: dur(same[1].p99()),
			goal: []cond{batonAtMost(float64(500*time.Millisecond), unitDuration)}},
		{metric: "failover_crash_same_host (TTL 10 s) median", unit: unitDuration,
			baton: dur(same[0].median()), floor: missing("—"), etcd: dur(same[1].median())},
	}, nil
}

// ttlExpiry writes n raw keys with the given TTL, staggered over 250 ms
// (the server's expiry tick), and measures from each write's acknowledgement
// to a watcher seeing the key expire.
func ttlExpiry(ctx context.Context, c *kv.Client, ttl time.Duration, n int) (samples, error) {
	kvb, err := floorBucket(ctx, c, "floor-expiry")
	if err != nil {
		return nil, err
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	w, err := kvb.Watch(ctx, "x-"+run+".>", jetstream.UpdatesOnly())
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	written := map[string]time.Time{}
	for i := range n {
		time.Sleep(250 * time.Millisecond / time.Duration(n))
		key := fmt.Sprintf("x-%s.%d", run, i)
		if _, err := kvb.Create(ctx, key, []byte("x"), jetstream.KeyTTL(ttl)); err != nil {
			return nil, err
		}
		written[key] = time.Now()
	}
	var out samples
	timeout := time.After(ttl + 30*time.Second)
	for len(out) < n {
		select {
		case e := <-w.Updates():
			if e == nil || e.Operation() == jetstream.KeyValuePut {
				continue
			}
			if t, ok := written[e.Key()]; ok {
				out = append(out, time.Since(t))
				delete(written, e.Key())
			}
		case <-timeout:
			return nil, fmt.Errorf("%d of %d keys did not expire", n-len(out), n)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, nil
}
