package kv_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

func TestEnsure_ReportsAndAppliesDifferentSettings(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	js, _ := jetstream.New(c.Conn())
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "odd", TTL: 5 * time.Second, History: 3}); err != nil {
		t.Fatal(err)
	}
	want := kv.BucketConfig{Name: "odd", MarkerTTL: time.Minute}
	_, err := c.Ensure(ctx, want)
	var me *kv.MismatchError
	if !errors.As(err, &me) || !errors.Is(err, kv.ErrBucketMismatch) {
		t.Fatalf("ensure over a different bucket: %v, want MismatchError", err)
	}
	got := map[string]bool{}
	for _, d := range me.Differences {
		got[d.Setting] = true
	}
	for _, s := range []string{"ttl", "history", "marker_ttl"} {
		if !got[s] {
			t.Errorf("difference %q not reported in %v", s, me)
		}
	}
	if err := c.Apply(ctx, want); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if err := c.Check(ctx, want); err != nil {
		t.Errorf("check after apply: %v", err)
	}
}

func TestApply_KeepsReplicasUnlessAsked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	cl := kvtest.StartCluster(t, 3)
	c := kvtest.Connect(t, cl.URLs())
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "r3", MarkerTTL: time.Minute, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	// Another marker TTL, replicas "as they are": applying keeps all three.
	want := kv.BucketConfig{Name: "r3", MarkerTTL: 5 * time.Minute}
	var me *kv.MismatchError
	if err := c.Check(ctx, want); !errors.As(err, &me) || len(me.Differences) != 1 || me.Differences[0].Setting != "marker_ttl" {
		t.Fatalf("check: %v, want only the marker TTL to differ", err)
	}
	if err := c.Apply(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(ctx, kv.BucketConfig{Name: "r3", MarkerTTL: 5 * time.Minute, Replicas: 3}); err != nil {
		t.Errorf("after apply: %v, want 3 replicas kept", err)
	}
}

// A bucket whose replicas cannot be placed (too few servers of the cluster
// up, or known to the meta leader as the cluster forms) is asked for again
// until the call's deadline; past it, the answer is that the servers are
// unavailable, and says what to do.
func TestEnsure_ReplicasThatCannotBePlacedAreUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl := kvtest.StartCluster(t, 3)
	c := kvtest.Connect(t, cl.URLs())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Ensure(ctx, kv.BucketConfig{Name: "placed", MarkerTTL: time.Minute, Replicas: 5})
	if !errors.Is(err, kv.ErrUnavailable) || !strings.Contains(err.Error(), "fewer than 5 servers") {
		t.Fatalf("5 replicas on 3 servers: %v, want ErrUnavailable naming the 5 servers", err)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Errorf("gave up after %s, before the call's deadline", waited)
	}
}
