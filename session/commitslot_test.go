package session_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// sent counts the messages the env's connection sends during fn: a KV
// operation is one.
func (e *env) sent(fn func()) uint64 {
	before := e.client.Conn().Stats().OutMsgs
	fn()
	return e.client.Conn().Stats().OutMsgs - before
}

// While this host's pid file holds the slot's last revision, a commit and a
// close are one compare-and-set each, and no read.
func TestCommitSlot_OneRoundTripWhileThePIDFileHoldsTheLastRevision(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	s, err := e.manager("h1", dir, session.WithPIDFiles(true)).Join(ctx, "slot", "T1", session.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for i, msg := range []string{"first", ""} {
		m := e.manager("h1", dir, session.WithPIDFiles(true)) // a new process each time, as the CLI
		var got *session.Session
		if n := e.sent(func() { got, err = m.CommitSlot(ctx, "slot", msg) }); err != nil || n != 1 {
			t.Fatalf("commit %d: %v after %d messages, want 1", i+1, err, n)
		}
		if got.Fence != s.Fence || got.Renewals != uint64(i+1) || got.Message != "first" || got.TTL != time.Minute {
			t.Errorf("commit %d: %+v", i+1, got)
		}
		cur, err := m.Get(ctx, "slot")
		if err != nil || cur.Revision != got.Revision || cur.Renewals != got.Renewals || cur.TaskID != "T1" || cur.Message != "first" {
			t.Errorf("stored after commit %d: %+v, %v", i+1, cur, err)
		}
		if cur.TTL != time.Minute {
			t.Errorf("commit %d kept a TTL of %s, want 1m", i+1, cur.TTL)
		}
	}
	m := e.manager("h1", dir, session.WithPIDFiles(true))
	var closed *session.Session
	if n := e.sent(func() { closed, err = m.CloseSlot(ctx, "slot", "success") }); err != nil || n != 1 || closed.Fence != s.Fence {
		t.Fatalf("close: %+v, %v after %d messages, want fence %d after 1", closed, err, n, s.Fence)
	}
	last, err := m.Bucket().Latest(ctx, "slot")
	if err != nil || last.Op != kv.OpDelete {
		t.Fatalf("after close: %+v, %v", last, err)
	}
	var note session.Record
	if err := json.Unmarshal(last.Value, &note); err != nil || note.Result != "success" || note.Fence != s.Fence || note.Renewals != 2 {
		t.Errorf("tombstone %+v, %v", note, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pids", "baton", "slot-slot.pid")); !os.IsNotExist(err) {
		t.Errorf("close left the pid file: %v", err)
	}
	if _, err := m.CloseSlot(ctx, "slot", "success"); !errors.Is(err, session.ErrLost) {
		t.Errorf("second close: %v, want ErrLost (closed)", err)
	}
}

// Another process of this host renewed the session: the pid file's revision
// is refused, nothing is written by it, and the commit follows the session
// as Resume then Commit would, then records the new revision for the next.
func TestCommitSlot_AfterAnotherProcessRenewedItReadsAndFollows(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	s, err := e.manager("h1", dir, session.WithPIDFiles(true)).Join(ctx, "slot", "T1")
	if err != nil {
		t.Fatal(err)
	}
	other := e.manager("h1", dir) // a library user of the same host: no pid files
	if _, err := other.Commit(ctx, s, "from the other"); err != nil {
		t.Fatal(err)
	}
	m := e.manager("h1", dir, session.WithPIDFiles(true))
	got, err := m.CommitSlot(ctx, "slot", "")
	if err != nil {
		t.Fatalf("commit after another process's: %v", err)
	}
	if got.Renewals != 2 || got.Message != "from the other" || got.Fence != s.Fence {
		t.Errorf("after following: %+v, want 2 renewals and the other's message", got)
	}
	if n := e.sent(func() { got, err = m.CommitSlot(ctx, "slot", "") }); err != nil || n != 1 || got.Renewals != 3 {
		t.Errorf("the next commit: %+v, %v after %d messages; want 3 renewals after 1", got, err, n)
	}
}

// Every way of losing the session comes out of CommitSlot and CloseSlot as
// it does out of Resume, and nothing is written over the slot's new state.
func TestCommitSlot_LostAsResumeSaysAndWritesNothing(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	withPIDFiles := func(dir string) *session.Manager { return e.manager("h1", dir, session.WithPIDFiles(true)) }
	for i, tc := range []struct {
		name  string
		setup func(t *testing.T, dir, slot string) (old *session.Session, fence uint64)
		want  error
		how   string
	}{
		{"closed by another process", func(t *testing.T, dir, slot string) (*session.Session, uint64) {
			s, _ := withPIDFiles(dir).Join(ctx, slot, "T1")
			if err := e.manager("h1", dir).Close(ctx, s, "success"); err != nil {
				t.Fatal(err)
			}
			return s, 0
		}, session.ErrLost, session.LostClosed},
		{"replaced on this host, the caller's fence given", func(t *testing.T, dir, slot string) (*session.Session, uint64) {
			s, _ := withPIDFiles(dir).Join(ctx, slot, "T1")
			if _, err := e.manager("h1", t.TempDir()).Join(ctx, slot, "T2", session.WithForce(true)); err != nil {
				t.Fatal(err)
			}
			return s, s.Fence
		}, session.ErrLost, session.LostTaken},
		{"taken by another host after it was closed", func(t *testing.T, dir, slot string) (*session.Session, uint64) {
			s, _ := withPIDFiles(dir).Join(ctx, slot, "T1")
			if err := e.manager("h1", dir).Close(ctx, s, "success"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.manager("h2", t.TempDir()).Join(ctx, slot, "T2"); err != nil {
				t.Fatal(err)
			}
			return s, 0
		}, session.ErrLost, session.LostTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			slot := "slot-" + strconv.Itoa(i)
			_, fence := tc.setup(t, dir, slot)
			before, _ := e.manager("h1", dir).Bucket().Latest(ctx, slot)
			for verb, call := range map[string]func() error{
				"commit": func() error {
					_, err := withPIDFiles(dir).CommitSlot(ctx, slot, "late", session.WithFence(fence))
					return err
				},
				"close": func() error {
					_, err := withPIDFiles(dir).CloseSlot(ctx, slot, "success", session.WithFence(fence))
					return err
				},
				"resume": func() error { _, err := withPIDFiles(dir).Resume(ctx, slot, session.WithFence(fence)); return err },
			} {
				err := call()
				var lost *session.LostError
				if !errors.Is(err, tc.want) || !errors.As(err, &lost) || lost.How != tc.how {
					t.Errorf("%s: %v, want %v (%s)", verb, err, tc.want, tc.how)
				}
			}
			after, _ := e.manager("h1", dir).Bucket().Latest(ctx, slot)
			if after.Revision != before.Revision {
				t.Errorf("the slot was written: revision %d, then %d", before.Revision, after.Revision)
			}
		})
	}
}

// A session replaced by a join of this host is this host's session, as
// Resume finds it: without a fence, a commit renews the new one.
func TestCommitSlot_RenewsThisHostsSessionWhateverItsFenceWithoutOne(t *testing.T) {
	ctx := ctxT(t)
	e := newEnv(t)
	dir := t.TempDir()
	if _, err := e.manager("h1", dir, session.WithPIDFiles(true)).Join(ctx, "slot", "T1"); err != nil {
		t.Fatal(err)
	}
	cur, err := e.manager("h1", t.TempDir()).Join(ctx, "slot", "T2", session.WithForce(true))
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.manager("h1", dir, session.WithPIDFiles(true)).CommitSlot(ctx, "slot", "m")
	if err != nil || got.Fence != cur.Fence || got.TaskID != "T2" {
		t.Errorf("commit without a fence: %+v, %v; want the new session (fence %d) renewed", got, err, cur.Fence)
	}
}
