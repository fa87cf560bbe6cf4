package kvserver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
)

// casWrite is a write a client was told succeeded.
type casWrite struct {
	key    string
	strict bool   // an update: applied only if the key's last revision was expected
	expect uint64 // the revision the write was made against
	rev    uint64
	client int
}

// A cluster member whose disk fills up while clients renew, release and
// take keys by compare-and-set (as sessions are) loses no acknowledged
// write and lets no write through against a revision that is not the
// key's last: for every key, no acknowledged update expected a revision
// older than an acknowledged write before it, and no create landed over
// an acknowledged live value that nobody tried to delete. Each case fills
// the disk of one server: the streams' leader, a follower, the meta
// leader.
func TestDiskGuard_AFullClusterMemberLetsNoStaleWriteThrough(t *testing.T) {
	for _, victim := range []string{"stream leader", "follower", "meta leader"} {
		t.Run(victim, func(t *testing.T) {
			if victim == "stream leader" && os.Getenv("BATON_UPSTREAM_DEFECTS") == "" {
				// nats-server 2.15.2 acknowledges two creates that
				// expected the same revision when the streams' leader
				// meets a full disk (3 runs in 60 here; adr/0034).
				t.Skip("a known nats-server defect (adr/0034): set BATON_UPSTREAM_DEFECTS=1 to run it")
			}
			disks := make([]string, 3)
			for i := range disks {
				disks[i] = kvtest.SmallDisk(t, 8<<20)
			}
			c := kvtest.StartClusterWith(t, 3, func(i int) []kvserver.Option {
				return []kvserver.Option{kvserver.WithStoreDir(filepath.Join(disks[i], "store"))}
			})
			ctx := context.Background()
			cfg := kv.BucketConfig{Name: "cas", MarkerTTL: time.Minute, Replicas: 3}
			b0, err := kvtest.Connect(t, c.URLs(), kv.WithTimeout(5*time.Second)).Ensure(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			keys := []string{"k0", "k1", "k2", "k3"}
			for _, k := range keys {
				if _, err := b0.Create(ctx, k, []byte("0"), time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			tr := &keyTrace{}
			var (
				mu       sync.Mutex
				acked    []casWrite
				deleting = map[string][]uint64{} // deletes tried, by the revision they expected
			)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 6 {
				// Each client starts on its own server, the full one too.
				cl := kvtest.Connect(t, c.Servers[w%3].ClientURL()+","+c.URLs(), kv.WithTimeout(3*time.Second), kv.WithTracer(tr))
				b, err := cl.Ensure(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ; n++ {
						select {
						case <-stop:
							return
						default:
						}
						k := keys[rand.IntN(len(keys))]
						e, err := b.Latest(ctx, k)
						if err != nil {
							time.Sleep(20 * time.Millisecond)
							continue
						}
						val := []byte(fmt.Sprintf("%d-%d", w, n))
						var rev uint64
						switch {
						case !e.Live():
							rev, err = b.CreateAfter(ctx, k, val, time.Minute, e.Revision)
						case rand.IntN(4) == 0:
							mu.Lock()
							deleting[k] = append(deleting[k], e.Revision)
							mu.Unlock()
							_ = b.Delete(ctx, k, e.Revision, val)
							continue
						default:
							rev, err = b.Update(ctx, k, val, time.Minute, e.Revision)
						}
						if err == nil {
							mu.Lock()
							acked = append(acked, casWrite{k, e.Live(), e.Revision, rev, w})
							mu.Unlock()
						}
					}
				}()
			}
			// Barrier: writes are going through before the disk fills.
			for {
				mu.Lock()
				n := len(acked)
				mu.Unlock()
				if n >= 200 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			full := c.StreamLeader("KV_cas")
			switch victim {
			case "follower":
				full = (full + 1) % 3
			case "meta leader":
				for i, s := range c.Servers {
					if s.NATS().JetStreamIsLeader() {
						full = i
					}
				}
			}
			kvtest.FillDisk(t, disks[full])
			mu.Lock()
			before := len(acked)
			mu.Unlock()
			time.Sleep(4 * time.Second)
			close(stop)
			wg.Wait()

			stale := staleWrites(acked, deleting)
			for _, p := range stale {
				t.Error(p)
			}
			if len(stale) > 0 {
				t.Log("every call on the keys, in the order made:\n" + tr.String())
			}
			t.Logf("n%d's disk filled: %d writes acknowledged before, %d after", full+1, before, len(acked)-before)
		})
	}
}

// staleWrites are the acknowledged writes that a server let through
// against a revision that was not the key's last: an update that expected
// a revision older than an acknowledged write before it, or a create over
// an acknowledged live value that nobody tried to delete.
func staleWrites(acked []casWrite, deleting map[string][]uint64) []string {
	byKey := map[string][]casWrite{}
	for _, a := range acked {
		byKey[a.key] = append(byKey[a.key], a)
	}
	var out []string
	for k, ws := range byKey {
		sort.Slice(ws, func(i, j int) bool { return ws[i].rev < ws[j].rev })
		for i := 1; i < len(ws); i++ {
			prev, w := ws[i-1], ws[i]
			if w.strict && w.expect < prev.rev {
				out = append(out, fmt.Sprintf("%s: update at %d (client %d) expected %d, older than acknowledged %d (client %d)", k, w.rev, w.client, w.expect, prev.rev, prev.client))
			}
			if !w.strict && !deleteTried(deleting[k], prev.rev, w.rev) {
				out = append(out, fmt.Sprintf("%s: create at %d (client %d) over acknowledged live %d (client %d), which nobody tried to delete", k, w.rev, w.client, prev.rev, prev.client))
			}
		}
	}
	return out
}

// The check above finds what it is for, and takes what is fine.
func TestStaleWrites(t *testing.T) {
	ok := []casWrite{{"k", true, 1, 5, 0}, {"k", true, 5, 7, 1}, {"k", false, 9, 10, 2}}
	if got := staleWrites(ok, map[string][]uint64{"k": {7}}); len(got) != 0 {
		t.Errorf("a clean history: %v", got)
	}
	lostUpdate := []casWrite{{"k", true, 1, 5, 0}, {"k", true, 3, 7, 1}}
	overLive := []casWrite{{"k", true, 1, 5, 0}, {"k", false, 2, 8, 1}}
	for _, h := range [][]casWrite{lostUpdate, overLive} {
		if got := staleWrites(h, map[string][]uint64{"k": {4}}); len(got) != 1 {
			t.Errorf("history %v: %v, want one stale write", h, got)
		}
	}
}

// deleteTried reports whether a delete was tried against a revision from
// live up to (not including) next.
func deleteTried(tried []uint64, live, next uint64) bool {
	for _, d := range tried {
		if d >= live && d < next {
			return true
		}
	}
	return false
}

// keyTrace keeps every call the clients made, for a failure's report.
type keyTrace struct {
	mu    sync.Mutex
	calls map[string]*kv.TraceCall
	lines []string
}

func (k *keyTrace) Call(c kv.TraceCall) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.calls == nil {
		k.calls = map[string]*kv.TraceCall{}
	}
	k.calls[fmt.Sprintf("%s/%d", c.Client, c.ID)] = &c
}

func (k *keyTrace) Return(r kv.TraceReturn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.calls[fmt.Sprintf("%s/%d", r.Client, r.ID)]
	if c == nil || !c.Op.Write() {
		return
	}
	line := fmt.Sprintf("%s %s %s %s expected %d value %q: %s rev %d", c.Time.Format("15:04:05.000"), r.Time.Format("15:04:05.000"), c.Key, c.Op, c.Expected, c.Value, r.Outcome, r.Revision)
	if r.Entry != nil {
		line += fmt.Sprintf(" entry %d %s", r.Entry.Revision, r.Entry.Op)
	}
	if r.Err != nil {
		line += fmt.Sprintf(" err %v", r.Err)
	}
	k.lines = append(k.lines, line)
}

func (k *keyTrace) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return strings.Join(k.lines, "\n")
}
