package kv_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

// blackHole takes every write to a bucket that has no stream and never
// answers, as a stream leader that stopped or stepped down drops a request
// it had received: the writer's attempt can only time out, unless
// something tells it earlier that its answer will not come.
type blackHole struct {
	nc   *nats.Conn
	got  chan struct{} // one value per write taken
	n    atomic.Int32
	seen chan struct{} // probes (holeProbe) that reached it
}

// holeProbe is the subject clusterWithGhost publishes to until the black
// hole's interest has reached the client's server.
const holeProbe = "$KV.ghost._probe"

func newBlackHole(t *testing.T, url, bucket string) *blackHole {
	t.Helper()
	nc, err := nats.Connect(url, nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	h := &blackHole{nc: nc, got: make(chan struct{}, 16), seen: make(chan struct{}, 1024)}
	if _, err := nc.Subscribe("$KV."+bucket+".>", func(m *nats.Msg) {
		if m.Subject == holeProbe {
			select {
			case h.seen <- struct{}{}:
			default:
			}
			return
		}
		h.n.Add(1)
		h.got <- struct{}{}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return h
}

// write starts a Create on the black hole's bucket and waits until the
// black hole has it. The returned channel gives the Create's error.
func (h *blackHole) write(t *testing.T, b *kv.Bucket) <-chan error {
	t.Helper()
	res := make(chan error, 1)
	go func() {
		_, err := b.Create(context.Background(), "k", []byte("v"), 0)
		res <- err
	}()
	select {
	case <-h.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the write did not reach the black hole")
	}
	return res
}

// ended waits for the write to end, far sooner than its attempt's timeout
// (10s), with what the re-read found: no bucket.
func ended(t *testing.T, res <-chan error, since time.Time) {
	t.Helper()
	select {
	case err := <-res:
		if !errors.Is(err, kv.ErrBucketNotFound) {
			t.Errorf("the write: %v, want the re-read's ErrBucketNotFound", err)
		}
		t.Logf("the write ended %s after the event: %v", time.Since(since).Round(time.Millisecond), err)
	case <-time.After(5 * time.Second):
		t.Fatal("the write waited out its attempt's timeout")
	}
}

// clusterWithGhost starts a cluster and picks the server through which the
// client under test connects (to be stopped): not the meta leader, which
// answers reads of a missing stream. The black hole listens on another.
func clusterWithGhost(t *testing.T) (cl *kvtest.Cluster, hole *blackHole, client int) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl = kvtest.StartCluster(t, 3)
	for cl.Servers[client].NATS().JetStreamIsLeader() {
		client++
	}
	hole = newBlackHole(t, cl.Servers[(client+1)%3].ClientURL(), "ghost")
	// The hole's interest reaches the client's server over a route, later
	// on a loaded machine: a write sent before would find no one.
	probe, err := nats.Connect(cl.Servers[client].ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := probe.Publish(holeProbe, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-hole.seen:
			return cl, hole, client
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the black hole's interest did not reach the client's server within 20s")
		}
	}
}

var ghost = kv.BucketConfig{Name: "ghost", MarkerTTL: time.Minute}

func TestRequest_ALostConnectionIsNotWaitedOut(t *testing.T) {
	cl, hole, i := clusterWithGhost(t)
	// A connection of the caller's, whose disconnect handler is still told.
	told := make(chan struct{}, 1)
	nc, err := nats.Connect(cl.Servers[i].ClientURL(), nats.DontRandomize(),
		nats.DisconnectErrHandler(func(*nats.Conn, error) {
			select {
			case told <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := kv.NewClient(nc, kv.WithTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res := hole.write(t, c.Bucket(ghost))
	start := time.Now()
	cl.Stop(i)
	ended(t, res, start)
	select {
	case <-told:
	case <-time.After(5 * time.Second):
		t.Error("the caller's disconnect handler was not called")
	}
}

func TestRequest_LameDuckModeMovesToAnotherServerAtOnce(t *testing.T) {
	cl, hole, i := clusterWithGhost(t)
	first := cl.Servers[i].ClientURL()
	var ldm atomic.Int32
	c := kvtest.Connect(t, first, kv.WithTimeout(20*time.Second),
		kv.WithNATSOptions(nats.DontRandomize(), nats.LameDuckModeHandler(func(*nats.Conn) { ldm.Add(1) })))
	res := hole.write(t, c.Bucket(ghost))
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl.Servers[i].NATS().LameDuckShutdown() // closes its clients after a 10s grace period
	}()
	defer func() { cl.Stop(i); <-done }()
	ended(t, res, start)
	if u := c.Conn().ConnectedUrl(); u == first || u == "" {
		t.Errorf("connected to %q during the grace period, want another server", u)
	}
	if ldm.Load() != 1 {
		t.Errorf("the caller's lame-duck handler was called %d times, want 1", ldm.Load())
	}
}

func TestRequest_ANewStreamLeaderEndsTheAttemptsOnItsStream(t *testing.T) {
	cl, hole, i := clusterWithGhost(t)
	c := kvtest.Connect(t, cl.Servers[i].ClientURL(), kv.WithTimeout(20*time.Second), kv.WithNATSOptions(nats.DontRandomize()))
	res := hole.write(t, c.Bucket(ghost))
	// The advisory the stream's new leader publishes; this one comes from
	// the test, on the black hole's server, which knows the client follows it.
	start := time.Now()
	if err := hole.nc.Publish("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.KV_ghost", []byte(`{"stream":"KV_ghost","leader":"n2"}`)); err != nil {
		t.Fatal(err)
	}
	ended(t, res, start)
	if n := hole.n.Load(); n != 1 {
		t.Errorf("the write was sent %d times, want 1 (its re-read found no bucket)", n)
	}
}
