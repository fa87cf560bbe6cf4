package session_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

func TestCommit_KeepsSessionPastSeveralTTLs(t *testing.T) {
	if testing.Short() {
		t.Skip("waits through TTLs")
	}
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	s, err := m.Join(ctx, "slot", "T1", session.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	fence := s.Fence
	for i := range 8 { // 3.2s: more than three TTLs
		time.Sleep(400 * time.Millisecond)
		if s, err = m.Commit(ctx, s, ""); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	got, err := m.Get(ctx, "slot")
	if err != nil || got.Fence != fence || got.Renewals != 8 {
		t.Fatalf("after commits: %+v, %v; want fence %d with 8 renewals", got, err, fence)
	}
}

func TestCommit_AfterExpiryIsLostAndResurrectsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a TTL")
	}
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	w, err := m.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Join(ctx, "slot", "T1", session.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(t, w, session.EventExpire, "slot", 5*time.Second)
	_, err = m.Commit(ctx, s, "late")
	var lost *session.LostError
	if !errors.As(err, &lost) || lost.How != session.LostExpired || lost.Fence != s.Fence {
		t.Fatalf("commit after expiry: %v, want lost: expired", err)
	}
	if _, err := m.Get(ctx, "slot"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("slot after a late commit: %v, want no session", err)
	}
	if _, err := m.Resume(ctx, "slot"); !errors.Is(err, session.ErrLost) {
		t.Errorf("resume after expiry: %v, want ErrLost", err)
	}
}

func TestCommit_AfterTakeoverIsLost(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	old, err := e.manager("h1", dir).Join(ctx, "slot", "T1")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := e.manager("h1", dir).Join(ctx, "slot", "T2", session.WithForce(true))
	if err != nil {
		t.Fatal(err)
	}
	m := e.manager("h1", dir)
	_, err = m.Commit(ctx, old, "stale holder")
	var lost *session.LostError
	if !errors.As(err, &lost) || lost.How != session.LostTaken || lost.Now == nil || lost.Now.Fence != cur.Fence {
		t.Fatalf("commit by the replaced holder: %v, want lost: taken over by fence %d", err, cur.Fence)
	}
	got, _ := m.Get(ctx, "slot")
	if got.Renewals != 0 || got.Message != "" {
		t.Errorf("the new session was changed by the stale commit: %+v", got)
	}
	if _, err := m.Resume(ctx, "slot", session.WithFence(old.Fence)); !errors.Is(err, session.ErrLost) {
		t.Errorf("resume with the old fence: %v, want ErrLost", err)
	}
}

func TestCommit_FollowsItsSessionRenewedByAnotherProcess(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	a := e.manager("h1", dir)
	s, err := a.Join(ctx, "slot", "T1")
	if err != nil {
		t.Fatal(err)
	}
	b := e.manager("h1", dir)
	other, _ := b.Resume(ctx, "slot")
	if _, err := b.Commit(ctx, other, "from b"); err != nil {
		t.Fatal(err)
	}
	next, err := a.Commit(ctx, s, "")
	if err != nil {
		t.Fatalf("commit on a stale revision of its own session: %v", err)
	}
	if next.Renewals != 2 || next.Message != "from b" || next.Fence != s.Fence {
		t.Errorf("after following: %+v, want 2 renewals, b's message kept, same fence", next)
	}
}

func TestResume_RefusesAnotherHost(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	if _, err := e.manager("h1", t.TempDir()).Join(ctx, "slot", "T1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.manager("h2", t.TempDir()).Resume(ctx, "slot"); !errors.Is(err, session.ErrForeignHost) {
		t.Errorf("resume from h2: %v, want ErrForeignHost", err)
	}
	if _, err := e.manager("h2", t.TempDir()).Resume(ctx, "never"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("resume of a slot never joined: %v, want ErrNotFound", err)
	}
}

func TestClose_LeavesResultAndIsIdempotent(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	s, err := m.Join(ctx, "slot", "T1")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx, s, "success"); err != nil {
		t.Fatalf("close: %v", err)
	}
	last, err := m.Bucket().Latest(ctx, "slot")
	if err != nil || last.Op != kv.OpDelete {
		t.Fatalf("tombstone: %+v, %v", last, err)
	}
	var note session.Record
	if err := json.Unmarshal(last.Value, &note); err != nil || note.Result != "success" || note.Fence != s.Fence {
		t.Errorf("tombstone note %+v, %v; want result success and the fence", note, err)
	}
	if err := m.Close(ctx, s, "success"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("second close: %v, want ErrNotFound", err)
	}
	if _, err := m.Resume(ctx, "slot"); !errors.Is(err, session.ErrLost) {
		t.Errorf("resume after close: %v, want ErrLost (closed)", err)
	}
}

func TestClose_LeavesANewerSessionAlone(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	old, _ := e.manager("h1", dir).Join(ctx, "slot", "T1")
	cur, err := e.manager("h1", dir).Join(ctx, "slot", "T2", session.WithForce(true))
	if err != nil {
		t.Fatal(err)
	}
	m := e.manager("h1", dir)
	if err := m.Close(ctx, old, "success"); !errors.Is(err, session.ErrLost) {
		t.Fatalf("close by the replaced holder: %v, want ErrLost", err)
	}
	if got, err := m.Get(ctx, "slot"); err != nil || got.Fence != cur.Fence {
		t.Errorf("slot after the stale close: %+v, %v; want fence %d", got, err, cur.Fence)
	}
}

func TestRecord_KeepsUnknownFieldsWhenRewritten(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	m := e.manager("h1", t.TempDir())
	s, err := m.Join(ctx, "slot", "T1")
	if err != nil {
		t.Fatal(err)
	}
	// A newer writer added a field.
	raw, _ := m.Bucket().Get(ctx, "slot")
	var doc map[string]any
	json.Unmarshal(raw.Value, &doc)
	doc["future_field"] = map[string]any{"x": 1.0}
	doc["fence"] = s.Fence // rewriters carry the fence; only the first revision stores 0
	b, _ := json.Marshal(doc)
	if _, err := m.Bucket().Update(ctx, "slot", b, s.TTL, s.Revision); err != nil {
		t.Fatal(err)
	}
	// Our handle is now stale: the commit follows the newer revision and
	// rewrites it, keeping what it does not know.
	if _, err = m.Commit(ctx, s, "m"); err != nil {
		t.Fatal(err)
	}
	raw, _ = m.Bucket().Get(ctx, "slot")
	doc = nil
	json.Unmarshal(raw.Value, &doc)
	if x, ok := doc["future_field"].(map[string]any); !ok || x["x"] != 1.0 {
		t.Errorf("unknown field lost on rewrite: %s", raw.Value)
	}
	if doc["message"] != "m" {
		t.Errorf("known field not written: %s", raw.Value)
	}
}

func TestPIDFiles_TellLostFromNeverJoined(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	m := e.manager("h1", dir, session.WithPIDFiles(true))
	s, err := m.Join(ctx, "slot", "T1")
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "pids", "baton", "slot-slot.pid")
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatalf("no pid file after join: %v", err)
	}
	files, _ := m.PIDFiles()
	if len(files) != 1 || files[0].Fence != s.Fence || files[0].PID != s.PID {
		t.Errorf("pid files %+v, want the session", files)
	}
	// The session vanishes without a trace on the server (as when its
	// tombstone has expired): this host still knows it had it.
	js, _ := jetstream.New(e.client.Conn())
	stream, err := js.Stream(ctx, "KV_baton-sessions")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject("$KV.baton-sessions.slot")); err != nil {
		t.Fatal(err)
	}
	var lost *session.LostError
	if _, err := m.Resume(ctx, "slot"); !errors.As(err, &lost) || lost.Fence != s.Fence {
		t.Errorf("resume of a slot this host joined, gone from the server: %v, want lost with fence %d", err, s.Fence)
	}
	other := e.manager("h1", dir, session.WithPIDFiles(true))
	if _, err := other.Resume(ctx, "never"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("resume of a slot never joined: %v, want ErrNotFound", err)
	}
	s2, _ := m.Join(ctx, "slot2", "T2")
	if err := m.Close(ctx, s2, "success"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pids", "baton", "slot-slot2.pid")); !os.IsNotExist(err) {
		t.Errorf("close left the pid file: %v", err)
	}
	// Without the option, no pid file is written.
	quiet := e.manager("h1", t.TempDir())
	if _, err := quiet.Join(ctx, "slot3", "T3"); err != nil {
		t.Fatal(err)
	}
	if files, _ := quiet.PIDFiles(); len(files) != 0 {
		t.Errorf("pid files written without WithPIDFiles: %+v", files)
	}
}
