package kv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
)

func TestErrors_MissingBucket(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	b := c.Bucket(kv.BucketConfig{Name: "nope", MarkerTTL: time.Minute})
	if _, err := b.Create(ctx, "a", []byte("x"), 0); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("create: %v", err)
	}
	if _, err := b.Latest(ctx, "a"); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("latest: %v", err)
	}
	if _, err := b.List(ctx); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("list: %v", err)
	}
	if err := c.Check(ctx, b.Config()); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("check: %v", err)
	}
}

func TestErrors_JetStreamDisabled(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) { o.JetStream = false }))
	c := kvtest.Connect(t, s.ClientURL())
	cfg := kv.BucketConfig{Name: "x", MarkerTTL: time.Minute}
	if _, err := c.Ensure(ctx, cfg); !errors.Is(err, kv.ErrJetStreamDisabled) {
		t.Errorf("ensure: %v, want ErrJetStreamDisabled", err)
	}
	if _, err := c.Bucket(cfg).Create(ctx, "a", nil, 0); !errors.Is(err, kv.ErrJetStreamDisabled) {
		t.Errorf("create: %v, want ErrJetStreamDisabled", err)
	}
}

func TestErrors_UnreachableNamesURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := kv.Connect(ctx, kv.WithURL("nats://127.0.0.1:1"), kv.WithTimeout(time.Second))
	if !errors.Is(err, kv.ErrUnavailable) || !strings.Contains(err.Error(), "nats://127.0.0.1:1") {
		t.Errorf("connect to a closed port: %v, want ErrUnavailable naming the URL", err)
	}
}

// A write the server refuses for lack of storage is kv.ErrStorageFull, at
// once (not retried as a transient answer until the timeout), and it was
// not applied; reads go on.
func TestErrors_StorageFull(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) { o.JetStreamMaxStore = 16 << 10 }))
	c := kvtest.Connect(t, s.ClientURL(), kv.WithTimeout(3*time.Second))
	b, err := c.Ensure(ctx, kv.BucketConfig{Name: "small", MarkerTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(strings.Repeat("v", 1000))
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("100 writes of 1000 bytes taken by a server whose store holds 16 KiB")
		}
		key := fmt.Sprintf("k%d", i)
		sent := time.Now()
		_, err := b.Create(ctx, key, value, 0)
		if err == nil {
			continue
		}
		if !errors.Is(err, kv.ErrStorageFull) || !strings.Contains(err.Error(), "insufficient resources") {
			t.Fatalf("write %s: %v, want kv.ErrStorageFull naming the server's answer", key, err)
		}
		if took := time.Since(sent); took > time.Second {
			t.Errorf("the refusal took %s, want it at once", took)
		}
		if _, err := b.Get(ctx, key); !errors.Is(err, kv.ErrNotFound) {
			t.Errorf("the refused write: %v, want it not applied", err)
		}
		if _, err := b.Get(ctx, "k0"); err != nil {
			t.Errorf("a read once the store is full: %v", err)
		}
		return
	}
}
