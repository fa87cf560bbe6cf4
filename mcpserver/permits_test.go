package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv/kvtest"
)

func TestPermits_AcquireStatusReleaseAndLoss(t *testing.T) {
	e := newEnv(t, kvtest.StartServer(t))
	ctx := context.Background()
	if _, err := e.conn.Sems.Create(ctx, "db", 2); err != nil {
		t.Fatal(err)
	}
	text, isErr := e.call(t, "acquire_permit", map[string]any{"name": "db"})
	if isErr || !strings.Contains(text, "index 0") {
		t.Fatalf("acquire_permit: %s (error %v)", text, isErr)
	}
	text, isErr = e.call(t, "acquire_permit", map[string]any{"name": "db", "weight": 2})
	if !isErr || !strings.Contains(text, "no room") {
		t.Fatalf("acquire_permit of 2 units with 1 free: %s (error %v); want a refusal", text, isErr)
	}
	text, isErr = e.call(t, "acquire_permit", map[string]any{"name": "nope"})
	if !isErr || !strings.Contains(text, "baton sem create nope") {
		t.Fatalf("acquire_permit of no semaphore: %s", text)
	}
	text, isErr = e.call(t, "sem_status", map[string]any{"name": "db"})
	if isErr || !strings.Contains(text, "1 of 2 units held") {
		t.Fatalf("sem_status: %s", text)
	}
	st, err := e.conn.Sems.Status(ctx, "db")
	if err != nil || len(st.Holders) != 1 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	id := st.Holders[0].Permit
	if _, isErr := e.call(t, "release_permit", map[string]any{"permit": id}); isErr {
		t.Fatal("release_permit refused")
	}
	if text, isErr := e.call(t, "release_permit", map[string]any{"permit": id}); !isErr || !strings.Contains(text, "not held") {
		t.Fatalf("release_permit again: %s", text)
	}

	// A permit lost (its unit removed by hand) is reported in the next
	// result.
	if _, isErr := e.call(t, "acquire_permit", map[string]any{"name": "db", "ttl_seconds": 1}); isErr {
		t.Fatal("acquire_permit refused")
	}
	cur, err := e.conn.Sems.Bucket().Get(ctx, "sem.db.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.conn.Sems.Bucket().Delete(ctx, "sem.db.0", cur.Revision, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		text, _ := e.call(t, "sem_status", map[string]any{"name": "db"})
		if strings.Contains(text, "LOST permit") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tool result reported the lost permit within 10s: %s", text)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Permits still held when the client goes are released.
	if _, isErr := e.call(t, "acquire_permit", map[string]any{"name": "db", "weight": 2}); isErr {
		t.Fatal("acquire_permit refused")
	}
	e.stop()
	if err := <-e.served; err != nil {
		t.Fatal(err)
	}
	if st, err := e.conn.Sems.Status(ctx, "db"); err != nil || st.Held != 0 {
		t.Fatalf("after the client went: %+v, %v; want nothing held", st, err)
	}
}
