package kvserver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
)

// A server whose store's disk fills up refuses writes at once, saying the
// storage is full (not leaving them unanswered), keeps answering reads,
// loses nothing it acknowledged, and takes writes again once space is
// freed, without a restart of the process; a watch goes on through it.
func TestDiskGuard_AFullDiskRefusesWritesThenTheyResume(t *testing.T) {
	disk := kvtest.SmallDisk(t, 4<<20)
	events := make(chan kvserver.DiskEvent, 16)
	s := startServer(t, kvserver.WithStoreDir(filepath.Join(disk, "store")),
		kvserver.WithServerOptions(func(o *server.Options) { o.Port = -1 }),
		kvserver.WithDiskEvents(func(e kvserver.DiskEvent) { events <- e }))
	c := kvtest.Connect(t, s.ClientURL(), kv.WithTimeout(2*time.Second))
	ctx := context.Background()
	b, err := c.Ensure(ctx, kv.BucketConfig{Name: "full", MarkerTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string]uint64{}
	put := func(key string) error {
		rev, err := b.Create(ctx, key, []byte("value of "+key), 0)
		if err == nil {
			acked[key] = rev
		}
		return err
	}
	for i := range 10 {
		if err := put(fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w, err := b.Watch(wctx, "", kv.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}

	filler := kvtest.FillDisk(t, disk)
	// The first write may meet the full disk and go unanswered; from then on
	// every write is refused as soon as it is sent.
	deadline := time.Now().Add(30 * time.Second)
	var refusal error
	for i := 0; refusal == nil; i++ {
		if time.Now().After(deadline) {
			t.Fatal("no write refused for a full disk within 30s")
		}
		err := put(fmt.Sprintf("full-%d", i))
		switch {
		case errors.Is(err, kv.ErrStorageFull):
			refusal = err
		case err != nil && !errors.Is(err, kv.ErrUnavailable):
			t.Fatalf("write to a full disk: %v, want kv.ErrStorageFull or kv.ErrUnavailable", err)
		}
	}
	t.Logf("refused: %v", refusal)
	full := waitEvent(t, events, 10*time.Second)
	t.Logf("event: %s", full)
	if !full.Full || full.Err == nil {
		t.Errorf("first disk event %+v, want Full with what the server met", full)
	}
	sent := time.Now()
	if err := put("refused"); !errors.Is(err, kv.ErrStorageFull) || time.Since(sent) > time.Second {
		t.Errorf("a write on the full disk: %v after %s, want kv.ErrStorageFull at once", err, time.Since(sent).Round(time.Millisecond))
	}
	if e, err := b.Get(ctx, "before-3"); err != nil || string(e.Value) != "value of before-3" {
		t.Errorf("a read on the full disk: %+v, %v", e, err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if resumed := waitEvent(t, events, 10*time.Second); resumed.Full || resumed.Err != nil {
		t.Fatalf("disk event after the space came back: %+v, want writes resumed", resumed)
	}
	if err := put("after"); err != nil {
		t.Fatalf("a write once space is back: %v", err)
	}
	for key, rev := range acked {
		e, err := b.Get(ctx, key)
		if err != nil || e.Revision != rev || string(e.Value) != "value of "+key {
			t.Errorf("acknowledged %s at revision %d: now %+v, %v", key, rev, e, err)
		}
	}
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				t.Fatal("the watch ended")
			}
			if e.Key == "after" {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the watch did not deliver the write made once space was back")
		}
	}
}

// In a cluster, a server whose disk fills up turns its JetStream off, and
// the others go on, and writes with them; the server says so, then that its
// disk has room again and that it must be restarted, and once restarted it
// catches up.
func TestDiskGuard_AClusteredServerSaysToRestartItOnceThereIsRoom(t *testing.T) {
	disk := kvtest.SmallDisk(t, 4<<20)
	events := make(chan kvserver.DiskEvent, 16)
	c := kvtest.StartClusterWith(t, 3, func(i int) []kvserver.Option {
		if i != 2 {
			return nil
		}
		return []kvserver.Option{kvserver.WithStoreDir(filepath.Join(disk, "store")),
			kvserver.WithDiskEvents(func(e kvserver.DiskEvent) { events <- e })}
	})
	client := kvtest.Connect(t, c.URLs(), kv.WithTimeout(5*time.Second))
	ctx := context.Background()
	b, err := client.Ensure(ctx, kv.BucketConfig{Name: "full", MarkerTTL: time.Minute, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string]uint64{}
	value := []byte(strings.Repeat("v", 2000))
	// put writes key; while the full server gives up a leadership it held,
	// a write may go unanswered.
	put := func(key string, mayFail bool) {
		t.Helper()
		rev, err := b.Create(ctx, key, value, 0)
		switch {
		case err == nil:
			acked[key] = rev
		case !mayFail || !errors.Is(err, kv.ErrUnavailable):
			t.Fatalf("write %s: %v", key, err)
		}
	}
	put("before", false)
	c.WaitCurrent(2, 10*time.Second, "KV_full")

	filler := kvtest.FillDisk(t, disk)
	// The server writes its store's blocks behind the answers it gives, so
	// the disk's refusal may come a while after the writes that meet it:
	// write until it does.
	var full kvserver.DiskEvent
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; full.Dir == ""; i++ {
		put(fmt.Sprintf("full-%d", i), true)
		select {
		case full = <-events:
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("no disk event after %d writes of 2000 bytes on a 4 MiB disk in 15s", i+1)
			}
		}
	}
	t.Logf("event: %s", full)
	if !full.Full || !full.Restart {
		t.Fatalf("first disk event %+v, want Full, saying to restart the server", full)
	}
	put("during", false)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	room := waitEvent(t, events, 10*time.Second)
	t.Logf("event: %s", room)
	if room.Full || !room.Restart {
		t.Fatalf("disk event after the space came back: %+v, want room again, saying to restart the server", room)
	}
	c.Stop(2)
	c.Restart(2)
	put("after", false)
	c.WaitCurrent(2, 30*time.Second, "KV_full")
	// With another server down, the one that was full is in the majority:
	// it holds every acknowledged write.
	// The two left elect the stream's leader again if it was the one
	// stopped: until then reads go unanswered.
	c.Stop(0)
	for key, rev := range acked {
		e, err := b.Get(ctx, key)
		for end := time.Now().Add(30 * time.Second); errors.Is(err, kv.ErrUnavailable) && time.Now().Before(end); {
			e, err = b.Get(ctx, key)
		}
		if err != nil || e.Revision != rev {
			t.Errorf("acknowledged %s at revision %d: now %+v, %v", key, rev, e, err)
		}
	}
}

func waitEvent(t *testing.T, events <-chan kvserver.DiskEvent, within time.Duration) kvserver.DiskEvent {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(within):
		t.Fatalf("no disk event within %s", within)
		return kvserver.DiskEvent{}
	}
}
