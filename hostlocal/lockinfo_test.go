package hostlocal

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/jsonrec/jsonrectest"
)

// lockInfo returns what Locks reports for the gate name.
func lockInfo(t *testing.T, d *StateDir, name string) LockInfo {
	t.Helper()
	infos, err := d.Locks()
	if err != nil {
		t.Fatalf("Locks: %v", err)
	}
	for _, info := range infos {
		if info.Name == name {
			return info
		}
	}
	t.Fatalf("Locks does not list %q: %+v", name, infos)
	return LockInfo{}
}

// writeOrphan leaves a gate file as a holder that died holding it would.
func writeOrphan(t *testing.T, d *StateDir, name string, h Holder) string {
	t.Helper()
	dir, err := d.subdir("locks")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".lock")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLocks_ListsSortedWithState(t *testing.T) {
	d := openTestDir(t)
	if infos, err := d.Locks(); err != nil || len(infos) != 0 {
		t.Fatalf("Locks of a fresh dir = %v, %v; want none", infos, err)
	}
	mustLock(t, d, "b-held", Holder{Purpose: "held"})
	clean := mustLock(t, d, "a-clean", Holder{})
	if err := clean.Unlock(); err != nil {
		t.Fatal(err)
	}
	writeOrphan(t, d, "c-orphan", Holder{PID: 1, Purpose: "dead"})
	if err := os.WriteFile(filepath.Join(d.Path(), "locks", ".ignored.lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	infos, err := d.Locks()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 3 || infos[0].Name != "a-clean" || infos[1].Name != "b-held" || infos[2].Name != "c-orphan" {
		t.Fatalf("Locks = %+v, want a-clean, b-held, c-orphan", infos)
	}
	if i := infos[0]; i.Held || i.Orphaned || i.Holder != nil {
		t.Errorf("clean gate: %+v", i)
	}
	if i := infos[1]; !i.Held || i.Orphaned || i.Holder == nil || i.Holder.Purpose != "held" {
		t.Errorf("held gate: %+v", i)
	}
	if i := infos[2]; i.Held || !i.Orphaned || i.Holder == nil || i.Holder.Purpose != "dead" {
		t.Errorf("orphaned gate: %+v", i)
	}
}

func TestLocks_ReportsGateHeldByAnotherProcess(t *testing.T) {
	d := openTestDir(t)
	hp := startHolder(t, d.Path(), "slot-p", "helper")
	info := lockInfo(t, d, "slot-p")
	if !info.Held || info.Orphaned || info.Holder == nil || info.Holder.PID != hp.pid() {
		t.Fatalf("Locks: %+v, want held by pid %d", info, hp.pid())
	}
	// Listing took nothing: the helper still holds the gate.
	if _, err := d.TryLock("slot-p", Holder{}); err == nil {
		t.Fatal("TryLock succeeded on a gate the helper holds")
	} else {
		asLocked(t, err)
	}
}

func TestLocks_DoesNotDisturbConcurrentLockers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux lists gates without probing them")
	}
	d := openTestDir(t)
	mustLock(t, d, "held", Holder{})
	free := mustLock(t, d, "free", Holder{})
	if err := free.Unlock(); err != nil {
		t.Fatal(err)
	}

	listed := make(chan struct{}) // closed after the first full listing
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		first := true
		for {
			infos, err := d.Locks()
			if err == nil && (len(infos) != 2 || infos[0].Orphaned || !infos[1].Held) {
				t.Errorf("Locks = %+v, want free (not orphaned) and held (held)", infos)
			}
			if err != nil {
				done <- err
				return
			}
			if first {
				close(listed)
				first = false
			}
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
		}
	}()
	<-listed
	for i := range 300 {
		l, err := d.TryLock("free", Holder{})
		if err != nil {
			t.Fatalf("TryLock #%d of a free gate while Locks runs: %v", i, err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("Locks: %v", err)
	}
}

func TestProbeHeld_ReportsHeldAndFree(t *testing.T) {
	d := openTestDir(t)
	held := mustLock(t, d, "held", Holder{})
	free := mustLock(t, d, "free", Holder{})
	if err := free.Unlock(); err != nil {
		t.Fatal(err)
	}
	if got, err := probeHeld(held.Path()); err != nil || !got {
		t.Errorf("probeHeld(held) = %v, %v; want true", got, err)
	}
	if got, err := probeHeld(free.Path()); err != nil || got {
		t.Errorf("probeHeld(free) = %v, %v; want false", got, err)
	}
	// The probe released what it took.
	mustLock(t, d, "free", Holder{})
}

func TestClearOrphan_ClearsOnlyOrphans(t *testing.T) {
	d := openTestDir(t)
	path := writeOrphan(t, d, "orphan", Holder{PID: 1, Start: "gone", Purpose: "dead"})

	if !lockInfo(t, d, "orphan").Orphaned {
		t.Fatal("the orphan is not reported Orphaned")
	}
	cleared, err := d.ClearOrphan("orphan")
	if err != nil || !cleared {
		t.Fatalf("ClearOrphan(orphan) = %v, %v; want true", cleared, err)
	}
	if b, err := os.ReadFile(path); err != nil || len(b) != 0 {
		t.Errorf("cleared gate file = %q, %v; want it present and empty", b, err)
	}
	if info := lockInfo(t, d, "orphan"); info.Orphaned || info.Held {
		t.Errorf("after ClearOrphan: %+v", info)
	}
	if cleared, err := d.ClearOrphan("orphan"); err != nil || cleared {
		t.Errorf("ClearOrphan of a clean gate = %v, %v; want false", cleared, err)
	}

	held := mustLock(t, d, "held", Holder{Purpose: "alive"})
	if cleared, err := d.ClearOrphan("held"); err != nil || cleared {
		t.Errorf("ClearOrphan of a held gate = %v, %v; want false, nil", cleared, err)
	}
	if len(gateContent(t, held)) == 0 {
		t.Error("ClearOrphan emptied a held gate's file")
	}
	if cleared, err := d.ClearOrphan("missing"); err != nil || cleared {
		t.Errorf("ClearOrphan of a missing gate = %v, %v; want false, nil", cleared, err)
	}
}

// The codec written from Holder's fields writes every one of them as
// encoding/json does.
func TestHolder_Codec(t *testing.T) {
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Holder]{Encode: (*Holder).encodeFast, Known: holderKnown})
}

// A holder's JSON is what encoding/json writes of its fields.
func TestHolder_MarshalJSONIsEncodingJSONs(t *testing.T) {
	type fields Holder // without the method
	at := time.Date(2026, 11, 26, 5, 4, 3, 123, time.FixedZone("x", 3600))
	for _, h := range []Holder{{}, {PID: 42, Start: "boot:1", Host: "h<1>", Instance: "i\"1", Since: at, Purpose: "baton join \u2028s"}, {PID: -1, Purpose: "p"}} {
		got, err := h.MarshalJSON()
		want, _ := json.Marshal(fields(h))
		if err != nil || string(got) != string(want) {
			t.Errorf("%+v:\ngot  %s (%v)\nwant %s", h, got, err, want)
		}
	}
}
