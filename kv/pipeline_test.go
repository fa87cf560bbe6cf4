package kv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
)

// A pipeline's writes are applied in the order given (their revisions
// grow with it), each as its own call would: creates, an update, deletes,
// with the results in order.
func TestPipeline_AppliesWritesInOrder(t *testing.T) {
	_, b := testBucket(t)
	ctx := context.Background()
	a0, err := b.Create(ctx, "a", []byte("a0"), 0)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := b.Create(ctx, "gone", []byte("g"), 0)
	if err != nil {
		t.Fatal(err)
	}
	tomb, err := b.DeleteRevision(ctx, "gone", gone, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := []kv.Write{
		{Kind: kv.WriteUpdate, Key: "a", Value: []byte("a1"), Rev: a0},
		{Kind: kv.WriteCreate, Key: "gone", Value: []byte("back"), TTL: time.Minute, Rev: tomb},
	}
	for i := range 20 {
		ws = append(ws, kv.Write{Kind: kv.WriteCreate, Key: fmt.Sprintf("n%02d", i), Value: []byte("v")})
	}
	res := b.Pipeline(ctx, ws)
	if len(res) != len(ws) {
		t.Fatalf("%d results for %d writes", len(res), len(ws))
	}
	var last uint64
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("write %d: %v", i, r.Err)
		}
		if r.Rev <= last {
			t.Fatalf("write %d at revision %d, after one at %d: not applied in order", i, r.Rev, last)
		}
		last = r.Rev
	}
	for _, want := range []struct{ key, value string }{{"a", "a1"}, {"gone", "back"}, {"n19", "v"}} {
		e, err := b.Get(ctx, want.key)
		if err != nil || string(e.Value) != want.value {
			t.Fatalf("%s = %q, %v; want %q", want.key, e.Value, err, want.value)
		}
	}
	// Deletes, too: the tombstones' revisions come back.
	del := b.Pipeline(ctx, []kv.Write{
		{Kind: kv.WriteDelete, Key: "a", Rev: res[0].Rev},
		{Kind: kv.WriteDelete, Key: "gone", Rev: res[1].Rev, Value: []byte("bye")},
	})
	for i, r := range del {
		if r.Err != nil || r.Rev <= last {
			t.Fatalf("delete %d = %d, %v; want a tombstone after %d", i, r.Rev, r.Err, last)
		}
	}
	if _, err := b.Get(ctx, "a"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("a after its delete: %v; want ErrNotFound", err)
	}
}

// A write that is refused, or that is not valid, fails alone: the writes
// around it land, and the refusal carries the entry in the way, as
// Create's does.
func TestPipeline_AWriteRefusedFailsAlone(t *testing.T) {
	_, b := testBucket(t)
	ctx := context.Background()
	if _, err := b.Create(ctx, "taken", []byte("mine"), 0); err != nil {
		t.Fatal(err)
	}
	res := b.Pipeline(ctx, []kv.Write{
		{Kind: kv.WriteCreate, Key: "before", Value: []byte("1")},
		{Kind: kv.WriteCreate, Key: "taken", Value: []byte("yours")},
		{Kind: kv.WriteUpdate, Key: "norev", Value: []byte("x")},
		{Kind: kv.WriteCreate, Key: "after", Value: []byte("2")},
	})
	var conflict *kv.ConflictError
	if !errors.As(res[1].Err, &conflict) || conflict.Current == nil || string(conflict.Current.Value) != "mine" {
		t.Fatalf("create of a live key = %v; want a ConflictError naming its value", res[1].Err)
	}
	if !errors.Is(res[2].Err, kv.ErrInvalidConfig) {
		t.Fatalf("update without a revision = %v; want ErrInvalidConfig", res[2].Err)
	}
	for _, i := range []int{0, 3} {
		if res[i].Err != nil || res[i].Rev == 0 {
			t.Fatalf("write %d beside the refused ones = %d, %v; want it written", i, res[i].Rev, res[i].Err)
		}
	}
	if res[3].Rev <= res[0].Rev {
		t.Fatalf("revisions %d then %d: not in order", res[0].Rev, res[3].Rev)
	}
}

// A write sent ahead whose answer is lost, or answered as by a leader that
// lost its place while its successor applied it, is found out by a re-read
// as its own call finds it: it landed, and says so.
func TestPipeline_ALostAnswerIsFoundOut(t *testing.T) {
	c, b := testBucket(t)
	ctx := context.Background()
	rev, err := b.Create(ctx, "k", []byte("v0"), 0)
	if err != nil {
		t.Fatal(err)
	}
	kv.DropAnswers(c, 1)
	res := b.Pipeline(ctx, []kv.Write{
		{Kind: kv.WriteUpdate, Key: "k", Value: []byte("v1"), Rev: rev},
		{Kind: kv.WriteCreate, Key: "j", Value: []byte("j")},
	})
	if res[0].Err != nil || res[0].Rev <= rev {
		t.Fatalf("update whose answer was lost = %d, %v; want it found landed", res[0].Rev, res[0].Err)
	}
	if res[1].Err != nil || res[1].Rev <= res[0].Rev {
		t.Fatalf("create behind it = %d, %v; want it written after", res[1].Rev, res[1].Err)
	}
	kv.AnswerUnavailable(c, 1)
	res = b.Pipeline(ctx, []kv.Write{{Kind: kv.WriteDelete, Key: "j", Rev: res[1].Rev, Value: []byte("note")}})
	if res[0].Err != nil {
		t.Fatalf("delete answered 503 after it landed = %v; want it found landed", res[0].Err)
	}
	if _, err := b.Get(ctx, "j"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("j after its delete: %v; want ErrNotFound", err)
	}
}

// In a cluster, through a server that may not lead the stream, the writes
// still land in the order given.
func TestPipeline_InOrderInACluster(t *testing.T) {
	_, _, b := r3Bucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ws []kv.Write
	for i := range 50 {
		ws = append(ws, kv.Write{Kind: kv.WriteCreate, Key: fmt.Sprintf("k%02d", i), Value: []byte("v"), TTL: time.Minute})
	}
	var last uint64
	for i, r := range b.Pipeline(ctx, ws) {
		if r.Err != nil || r.Rev <= last {
			t.Fatalf("write %d = %d, %v; want a revision after %d", i, r.Rev, r.Err, last)
		}
		last = r.Rev
	}
}

// A pipeline whose context is done sends nothing, as a single write does
// not.
func TestPipeline_SendsNothingOnceItsContextIsDone(t *testing.T) {
	_, b := testBucket(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := b.Pipeline(ctx, []kv.Write{{Kind: kv.WriteCreate, Key: "k", Value: []byte("v")}})
	if !errors.Is(res[0].Err, context.Canceled) {
		t.Fatalf("a write of a cancelled pipeline = %v; want context.Canceled", res[0].Err)
	}
	if _, err := b.Get(context.Background(), "k"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("k after a cancelled pipeline: %v; want it never written", err)
	}
}
