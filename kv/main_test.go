package kv_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testBucket(t *testing.T) (*kv.Client, *kv.Bucket) {
	t.Helper()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	b, err := c.Ensure(context.Background(), kv.BucketConfig{Name: "test", MarkerTTL: time.Minute})
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	return c, b
}

func outMsgs(c *kv.Client) uint64 { return c.Conn().Stats().OutMsgs }

// r3Bucket starts a 3-server cluster and a client of it (with opts), and
// creates the bucket r3 on all three.
func r3Bucket(t *testing.T, opts ...kv.Option) (*kvtest.Cluster, *kv.Client, *kv.Bucket) {
	t.Helper()
	cl := kvtest.StartCluster(t, 3)
	c := kvtest.Connect(t, cl.URLs(), opts...)
	b, err := c.Ensure(context.Background(), kv.BucketConfig{Name: "r3", MarkerTTL: time.Minute, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	return cl, c, b
}
