package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/reserve"
)

// TestReservations_TwoAgentsCannotEditTheSameFiles: one agent reserves
// through the tools; another (a second host's process) is refused naming
// it, checks see it, and the reservation goes when the first releases, is
// lost, or disconnects.
func TestReservations_TwoAgentsCannotEditTheSameFiles(t *testing.T) {
	srv := kvtest.StartServer(t)
	e := newEnv(t, srv)
	ctx := context.Background()
	other, err := reserve.New(kvtest.Connect(t, srv.ClientURL()), reserve.WithHostID("h2"))
	if err != nil {
		t.Fatal(err)
	}

	text, isErr := e.call(t, "reserve_paths", map[string]any{"space": "app", "patterns": []string{"src/parser/**", "docs/api.md"}, "task": "T-1", "agent": "alice"})
	if isErr || !strings.Contains(text, "reserved src/parser/** docs/api.md in app exclusively") {
		t.Fatalf("reserve_paths: %s (error %v)", text, isErr)
	}
	_, err = other.TryReserve(ctx, "app", []string{"src/parser/lexer.go"})
	if err == nil || !strings.Contains(err.Error(), "agent alice, task T-1, host h1") {
		t.Fatalf("another agent's request: %v; want a refusal naming alice", err)
	}
	bob, err := other.TryReserve(ctx, "app", []string{"README.md"}, reserve.WithAgent("bob"))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Release(ctx)

	// The agent asking for bob's file and its own free one gets neither.
	text, isErr = e.call(t, "reserve_paths", map[string]any{"space": "app", "patterns": []string{"Makefile", "README.md"}})
	if !isErr || !strings.Contains(text, "README.md is reserved exclusively by agent bob") || !strings.Contains(text, "do not edit any of these paths") {
		t.Fatalf("reserve_paths of bob's file: %s (error %v)", text, isErr)
	}
	text, isErr = e.call(t, "check_paths", map[string]any{"space": "app", "paths": []string{"src/parser/x.go", "Makefile"}})
	if isErr || !strings.Contains(text, "free: no one else holds") {
		t.Fatalf("check_paths of its own and a free path: %s (error %v)", text, isErr)
	}
	text, _ = e.call(t, "check_paths", map[string]any{"space": "app", "paths": []string{"README.md"}})
	if !strings.Contains(text, "NOT free") || !strings.Contains(text, "bob") {
		t.Fatalf("check_paths of bob's path: %s", text)
	}
	text, isErr = e.call(t, "list_reservations", map[string]any{"space": "app"})
	if isErr || !strings.Contains(text, "2 reservations held") {
		t.Fatalf("list_reservations: %s", text)
	}
	text, isErr = e.call(t, "reserve_paths", map[string]any{"space": "app", "patterns": []string{"/etc"}})
	if !isErr || !strings.Contains(text, "invalid arguments") {
		t.Fatalf("reserve_paths of an absolute path: %s", text)
	}

	// Released: the other agent gets the paths.
	if text, isErr := e.call(t, "release_paths", map[string]any{}); isErr || !strings.Contains(text, "released") {
		t.Fatalf("release_paths: %s", text)
	}
	got, err := other.TryReserve(ctx, "app", []string{"src/parser/lexer.go"})
	if err != nil {
		t.Fatalf("after release_paths: %v", err)
	}
	_ = got.Release(ctx)

	// Lost (released by someone else): the next result says so.
	if _, isErr := e.call(t, "reserve_paths", map[string]any{"space": "app", "patterns": []string{"lib/**"}, "ttl_seconds": 3}); isErr {
		t.Fatal("reserve_paths refused")
	}
	st, err := other.Status(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Reservations {
		if r.Patterns[0] == "lib/**" {
			res, err := other.Resume(ctx, "app", r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		text, _ := e.call(t, "list_reservations", map[string]any{"space": "app"})
		if strings.Contains(text, "LOST reservation") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tool result reported the lost reservation within 10s: %s", text)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Reservations still held when the client goes are released.
	if _, isErr := e.call(t, "reserve_paths", map[string]any{"space": "app", "patterns": []string{"src/**"}}); isErr {
		t.Fatal("reserve_paths refused")
	}
	e.stop()
	if err := <-e.served; err != nil {
		t.Fatal(err)
	}
	if st, err := other.Status(ctx, "app"); err != nil || st.Held() != 1 {
		t.Fatalf("after the client went: %+v, %v; want bob's alone", st, err)
	}
}
