package kv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
)

// recorder is a Tracer that keeps every event.
type recorder struct {
	mu      sync.Mutex
	calls   []kv.TraceCall
	returns []kv.TraceReturn
}

func (r *recorder) Call(c kv.TraceCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.Value = bytes.Clone(c.Value)
	r.calls = append(r.calls, c)
}

func (r *recorder) Return(ret kv.TraceReturn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.returns = append(r.returns, ret)
}

// last is the last call and its return; it fails unless they pair up.
func (r *recorder) last(t *testing.T) (kv.TraceCall, kv.TraceReturn) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 || len(r.calls) != len(r.returns) {
		t.Fatalf("%d calls, %d returns", len(r.calls), len(r.returns))
	}
	c, ret := r.calls[len(r.calls)-1], r.returns[len(r.returns)-1]
	if c.ID != ret.ID || c.Client != ret.Client || c.Client == "" {
		t.Fatalf("call %s/%d paired with return %s/%d", c.Client, c.ID, ret.Client, ret.ID)
	}
	if ret.Time.Before(c.Time) {
		t.Fatalf("return at %v before its call at %v", ret.Time, c.Time)
	}
	return c, ret
}

func tracedBucket(t *testing.T, opts ...kv.Option) (*kvserver.Server, *kv.Client, *kv.Bucket, *recorder) {
	t.Helper()
	rec := &recorder{}
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL(), append([]kv.Option{kv.WithTracer(rec)}, opts...)...)
	b, err := c.Ensure(context.Background(), kv.BucketConfig{Name: "test", MarkerTTL: time.Minute})
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	return s, c, b, rec
}

func TestTracer_SeesEachCallWithItsOutcome(t *testing.T) {
	ctx := context.Background()
	_, _, b, rec := tracedBucket(t)
	check := func(what string, op kv.TraceOp, expected uint64, outcome kv.Outcome) (kv.TraceCall, kv.TraceReturn) {
		t.Helper()
		c, r := rec.last(t)
		if c.Op != op || c.Bucket != "test" || c.Key != "a" || c.Expected != expected || c.MarkerTTL != time.Minute {
			t.Errorf("%s: call %+v, want op %s on test/a expecting %d, marker TTL 1m", what, c, op, expected)
		}
		if r.Outcome != outcome {
			t.Errorf("%s: outcome %s (err %v), want %s", what, r.Outcome, r.Err, outcome)
		}
		return c, r
	}

	if _, err := b.Get(ctx, "a"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get of a fresh key: %v", err)
	}
	if _, r := check("get of a fresh key", kv.TraceGet, 0, kv.OutcomeNotFound); r.Entry != nil {
		t.Errorf("get of a fresh key traced entry %+v", r.Entry)
	}

	r1, err := b.Create(ctx, "a", []byte("v1"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, r := check("create", kv.TraceCreate, 0, kv.OutcomeOK)
	if string(c.Value) != "v1" || c.TTL != 5*time.Second || r.Revision != r1 || r.Err != nil {
		t.Errorf("create traced %+v -> %+v, want v1 with TTL 5s at revision %d", c, r, r1)
	}

	if _, err := b.Create(ctx, "a", []byte("v2"), 0); !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("second create: %v", err)
	}
	if _, r := check("second create", kv.TraceCreate, 0, kv.OutcomeConflict); r.Entry == nil || r.Entry.Revision != r1 || r.Revision != 0 {
		t.Errorf("second create's conflict traced %+v, want the live entry at %d", r, r1)
	}

	r2, err := b.Update(ctx, "a", []byte("v4"), 5*time.Second, r1)
	if err != nil {
		t.Fatal(err)
	}
	if _, r := check("update", kv.TraceUpdate, r1, kv.OutcomeOK); r.Revision != r2 {
		t.Errorf("update traced revision %d, want %d", r.Revision, r2)
	}

	// A revision the key had, since replaced: the server names a newer
	// one, so the refusal is definite (adr/0026).
	if _, err := b.Update(ctx, "a", []byte("v3"), 0, r1); !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	check("stale update", kv.TraceUpdate, r1, kv.OutcomeConflict)

	if _, err := b.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, r := check("get", kv.TraceGet, 0, kv.OutcomeOK); r.Entry == nil || r.Entry.Revision != r2 || string(r.Entry.Value) != "v4" || r.Entry.Op != kv.OpPut {
		t.Errorf("get traced %+v, want v4 at %d", r.Entry, r2)
	}

	tomb, err := b.DeleteRevision(ctx, "a", r2, []byte("bye"))
	if err != nil {
		t.Fatal(err)
	}
	if c, r := check("delete", kv.TraceDelete, r2, kv.OutcomeOK); r.Revision != tomb || string(c.Value) != "bye" || c.TTL != time.Minute {
		t.Errorf("delete traced %+v -> %+v, want note bye, tombstone TTL 1m, revision %d", c, r, tomb)
	}

	if _, err := b.Get(ctx, "a"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get of a deleted key: %v", err)
	}
	if _, r := check("get of a deleted key", kv.TraceGet, 0, kv.OutcomeNotFound); r.Entry == nil || r.Entry.Op != kv.OpDelete || r.Entry.Revision != tomb {
		t.Errorf("get of a deleted key traced %+v, want the tombstone at %d", r.Entry, tomb)
	}
	if _, err := b.Latest(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, r := check("latest", kv.TraceLatest, 0, kv.OutcomeOK); r.Entry == nil || string(r.Entry.Value) != "bye" {
		t.Errorf("latest traced %+v, want the tombstone with its note", r.Entry)
	}

	if err := b.Delete(ctx, "a", r2, nil); !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("stale delete: %v", err)
	}
	check("stale delete", kv.TraceDelete, r2, kv.OutcomeConflict)

	r3, err := b.CreateAfter(ctx, "a", []byte("v5"), 0, tomb)
	if err != nil {
		t.Fatal(err)
	}
	if _, r := check("create after", kv.TraceCreateAfter, tomb, kv.OutcomeOK); r.Revision != r3 {
		t.Errorf("create after traced revision %d, want %d", r.Revision, r3)
	}

	if _, err := b.Update(ctx, "a", []byte("v6"), 0, 0); !errors.Is(err, kv.ErrInvalidConfig) {
		t.Fatalf("update of revision 0: %v", err)
	}
	check("update of revision 0", kv.TraceUpdate, 0, kv.OutcomeFailed)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	seen := map[uint64]bool{}
	for _, c := range rec.calls {
		if seen[c.ID] {
			t.Errorf("id %d traced twice", c.ID)
		}
		seen[c.ID] = true
	}
}

func TestTracer_LostAnswerThatLandedIsOK(t *testing.T) {
	ctx := context.Background()
	_, c, b, rec := tracedBucket(t)
	r1, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	kv.DropAnswers(c, 1)
	r2, err := b.Update(ctx, "a", []byte("v2"), 0, r1)
	if err != nil {
		t.Fatal(err)
	}
	if _, r := rec.last(t); r.Outcome != kv.OutcomeOK || r.Revision != r2 {
		t.Errorf("update whose answer was lost traced %+v, want ok at %d", r, r2)
	}
}

// A conflict seen while an earlier attempt's answer was lost is not a
// definite refusal: as far as the caller can tell, that attempt may have
// landed and been replaced since.
func TestTracer_ConflictAfterLostAnswerIsUnknown(t *testing.T) {
	ctx := context.Background()
	_, c, b, rec := tracedBucket(t)
	r1, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, "a", []byte("rival"), 0, r1); err != nil {
		t.Fatal(err)
	}
	kv.DropAnswers(c, 1) // the refusal's answer is lost
	if _, err := b.Update(ctx, "a", []byte("v2"), 0, r1); !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("stale update: %v, want ErrConflict", err)
	}
	if _, r := rec.last(t); r.Outcome != kv.OutcomeUnknown {
		t.Errorf("conflict after a lost answer traced %s, want unknown", r.Outcome)
	}
}

func TestTracer_WriteToAStoppedServerIsUnknown(t *testing.T) {
	ctx := context.Background()
	s, _, b, rec := tracedBucket(t, kv.WithTimeout(time.Second))
	r1, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	// The client buffers the write while it reconnects: it is sent if the
	// server comes back in time, so nobody can say whether it lands.
	if _, err := b.Update(ctx, "a", []byte("v2"), 0, r1); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("update with the server stopped: %v, want ErrUnavailable", err)
	}
	if c, r := rec.last(t); c.Op != kv.TraceUpdate || r.Outcome != kv.OutcomeUnknown || r.Outcome.Definite() || r.Err == nil {
		t.Errorf("update with the server stopped traced %+v, want unknown", r)
	}
	if _, err := b.Get(ctx, "a"); err == nil {
		t.Fatal("get with the server stopped succeeded")
	}
	if _, r := rec.last(t); r.Outcome == kv.OutcomeOK || r.Outcome == kv.OutcomeNotFound {
		t.Errorf("get with the server stopped traced %s", r.Outcome)
	}
}

// A write refused as in progress (10164) until the deadline is unavailable,
// and may have been applied: the refusals may have come from a deposed
// leader whose successor applied the first attempt (adr/0026).
func TestTracer_RefusedAsInProgressUntilTheDeadlineIsUnknown(t *testing.T) {
	ctx := context.Background()
	_, c, b, rec := tracedBucket(t, kv.WithTimeout(500*time.Millisecond))
	r1, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	kv.RefuseInProgress(c, 1_000_000)
	defer kv.RefuseInProgress(c, 0)
	if _, err := b.Update(ctx, "a", []byte("v2"), 0, r1); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("refused update: %v, want ErrUnavailable", err)
	}
	if _, r := rec.last(t); r.Outcome != kv.OutcomeUnknown {
		t.Errorf("refused update traced %s (%v), want unknown", r.Outcome, r.Err)
	}
}

// writes records each Write call.
type writes struct {
	mu    sync.Mutex
	calls [][]byte
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, bytes.Clone(p))
	return len(p), nil
}

func TestJSONTracer_OneWritePerLineFromConcurrentCalls(t *testing.T) {
	ctx := context.Background()
	out := &writes{}
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL(), kv.WithTracer(kv.NewJSONTracer(out)))
	b, err := c.Ensure(ctx, kv.BucketConfig{Name: "test", MarkerTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 4, 10
	value := func(w, i int) []byte { return []byte(strings.Repeat(fmt.Sprintf("w%d-%d ", w, i), 50)) }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				e, err := b.Get(ctx, "k")
				if errors.Is(err, kv.ErrNotFound) {
					_, _ = b.Create(ctx, "k", value(w, i), 0)
					continue
				}
				if err == nil {
					_, _ = b.Update(ctx, "k", value(w, i), 0, e.Revision)
				}
			}
		})
	}
	wg.Wait()

	out.mu.Lock()
	defer out.mu.Unlock()
	open := map[uint64]kv.TraceLine{}
	returns := 0
	for _, p := range out.calls {
		if bytes.Count(p, []byte("\n")) != 1 || p[len(p)-1] != '\n' {
			t.Fatalf("a write is not one line: %q", p)
		}
		var l kv.TraceLine
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %q: %v", p, err)
		}
		switch l.Event {
		case "call":
			if l.Op.Write() {
				if !strings.HasSuffix(l.Value, fmt.Sprintf(":%d", len(value(0, 0)))) || len(l.Value) != 16+1+3 {
					t.Errorf("write's value recorded as %q, want a digest and length %d", l.Value, len(value(0, 0)))
				}
			}
			open[l.ID] = l
		case "return":
			call, ok := open[l.ID]
			if !ok {
				t.Fatalf("return %d without its call", l.ID)
			}
			delete(open, l.ID)
			returns++
			if l.Client != call.Client || l.Time.Before(call.Time) {
				t.Errorf("return %+v does not follow its call %+v", l, call)
			}
			if call.Op.Write() && l.Outcome == kv.OutcomeOK && l.Revision == 0 {
				t.Errorf("acknowledged write %+v without its revision", l)
			}
			if call.Op == kv.TraceGet && l.Outcome == kv.OutcomeOK && (l.Entry == nil || l.Entry.Op != "put" || l.Entry.Value == "") {
				t.Errorf("read %+v without its entry", l)
			}
		default:
			t.Fatalf("line %q: event %q", p, l.Event)
		}
	}
	if len(open) != 0 || returns < workers*rounds {
		t.Errorf("%d calls without a return, %d returns, want none and at least %d", len(open), returns, workers*rounds)
	}
	if kv.Digest([]byte("a")) == kv.Digest([]byte("b")) || kv.Digest(nil) != "e3b0c44298fc1c14:0" {
		t.Errorf("digests: %s %s %s", kv.Digest([]byte("a")), kv.Digest([]byte("b")), kv.Digest(nil))
	}
}

// A write answered 503 (the stream between leaders) may have been committed
// by the next leader: its retry then meets its own write as a conflict, and
// the call must recognise the write as its own rather than report it
// refused, and trace it as applied.
func TestCAS_AWriteAnswered503ThatLandedIsRecognised(t *testing.T) {
	ctx := context.Background()
	_, c, b, rec := tracedBucket(t)
	outcome := func(what string, want kv.Outcome) {
		t.Helper()
		if _, r := rec.last(t); r.Outcome != want {
			t.Errorf("%s: traced %s (err %v), want %s", what, r.Outcome, r.Err, want)
		}
	}

	kv.AnswerUnavailable(c, 1)
	rev, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatalf("create answered 503 that landed: %v", err)
	}
	outcome("create", kv.OutcomeOK)
	if e, _ := b.Get(ctx, "a"); e.Revision != rev || string(e.Value) != "v1" {
		t.Fatalf("create: got %+v, want v1 at %d", e, rev)
	}

	kv.AnswerUnavailable(c, 1)
	rev2, err := b.Update(ctx, "a", []byte("v2"), 0, rev)
	if err != nil || rev2 <= rev {
		t.Fatalf("update answered 503 that landed: %d, %v", rev2, err)
	}
	outcome("update", kv.OutcomeOK)

	kv.AnswerUnavailable(c, 1)
	if err := b.Delete(ctx, "a", rev2, []byte("bye")); err != nil {
		t.Fatalf("delete answered 503 that landed: %v", err)
	}
	outcome("delete", kv.OutcomeOK)
	if _, err := b.Get(ctx, "a"); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}

	// A 503 does not turn a real conflict into a success.
	other, err := b.Create(ctx, "b", []byte("theirs"), 0)
	if err != nil {
		t.Fatal(err)
	}
	kv.AnswerUnavailable(c, 1)
	if _, err := b.Update(ctx, "b", []byte("mine"), 0, other+100); !errors.Is(err, kv.ErrConflict) {
		t.Errorf("stale update answered 503: %v, want ErrConflict", err)
	}
	// Traced as unknown, not conflict: after an ambiguous answer the trace
	// claims no definite refusal (in general the write may have landed and
	// been overwritten before the re-read).
	outcome("stale update", kv.OutcomeUnknown)
}

// A leader cut off from the others answers writes as leader until it hears
// of its successor, from its old copy of the key, and a write reaches both:
// its refusal can come first while the successor applied the write.
func TestCAS_ADeposedLeadersRefusalOfAWriteThatLandedIsRecognised(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	rec := &recorder{}
	_, c, b := r3Bucket(t, kv.WithTracer(rec))
	outcome := func(what string, want kv.Outcome) {
		t.Helper()
		if _, r := rec.last(t); r.Outcome != want {
			t.Errorf("%s: traced %s (err %v), want %s", what, r.Outcome, r.Err, want)
		}
	}
	rev, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}

	kv.AnswerStale(c, 1)
	rev2, err := b.Update(ctx, "a", []byte("v2"), 0, rev)
	if err != nil || rev2 <= rev {
		t.Fatalf("update refused by a deposed leader, applied by its successor: %d, %v; want a revision after %d", rev2, err, rev)
	}
	outcome("update", kv.OutcomeOK)

	kv.AnswerStale(c, 1)
	tomb, err := b.DeleteRevision(ctx, "a", rev2, []byte("bye"))
	if err != nil || tomb <= rev2 {
		t.Fatalf("delete refused by a deposed leader, applied by its successor: %d, %v", tomb, err)
	}
	outcome("delete", kv.OutcomeOK)

	kv.AnswerStale(c, 1)
	rev3, err := b.CreateAfter(ctx, "a", []byte("v3"), 0, tomb)
	if err != nil || rev3 <= tomb {
		t.Fatalf("create refused by a deposed leader, applied by its successor: %d, %v", rev3, err)
	}
	outcome("create after", kv.OutcomeOK)
	if e, _ := b.Get(ctx, "a"); e.Revision != rev3 || string(e.Value) != "v3" {
		t.Fatalf("got %+v, want v3 at %d", e, rev3)
	}

	// A refusal from a deposed leader of a write it did not pass on: the
	// key is unchanged, so the write is sent again, and lands.
	kv.RefuseStale(c, 1)
	rev4, err := b.Update(ctx, "a", []byte("v4"), 0, rev3)
	if err != nil || rev4 <= rev3 {
		t.Fatalf("update refused unsent by a deposed leader: %d, %v", rev4, err)
	}
	outcome("update sent again", kv.OutcomeOK)

	// The key moved on meanwhile: still a conflict for the caller, but not
	// a definite one in the trace (the write may have landed and been
	// replaced before the re-read).
	if _, err := b.Update(ctx, "a", []byte("theirs"), 0, rev4); err != nil {
		t.Fatal(err)
	}
	kv.RefuseStale(c, 1)
	if _, err := b.Update(ctx, "a", []byte("mine"), 0, rev4); !errors.Is(err, kv.ErrConflict) {
		t.Errorf("update of a replaced revision refused by a deposed leader: %v, want ErrConflict", err)
	}
	outcome("update of a replaced revision", kv.OutcomeUnknown)

	// A server that names a last revision newer than the one expected is
	// not behind: its refusal stands as a definite conflict.
	if _, err := b.Update(ctx, "a", []byte("late"), 0, rev4); !errors.Is(err, kv.ErrConflict) {
		t.Errorf("update of a replaced revision: %v, want ErrConflict", err)
	}
	outcome("plain conflict", kv.OutcomeConflict)
}

// On a single server there is no deposed leader: a refusal naming an older
// revision than expected (the key vanished, or the revision was never the
// key's) is not taken for one, and a conflict after it stays definite.
func TestCAS_OnASingleServerARefusalIsDefinite(t *testing.T) {
	ctx := context.Background()
	_, c, b, rec := tracedBucket(t)
	rev, err := b.Create(ctx, "a", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, "a", []byte("theirs"), 0, rev); err != nil {
		t.Fatal(err)
	}
	kv.RefuseStale(c, 1)
	if _, err := b.Update(ctx, "a", []byte("mine"), 0, rev); !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("update of a replaced revision: %v, want ErrConflict", err)
	}
	if _, r := rec.last(t); r.Outcome != kv.OutcomeConflict {
		t.Errorf("traced %s (%v), want conflict", r.Outcome, r.Err)
	}
}
