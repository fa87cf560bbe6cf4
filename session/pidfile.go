package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/batonhq/baton/kv"
)

// pidRecord is what the host-local pid file holds: the file a join leaves under
// <state-dir>/pids/<prefix>/slot-SLOT.pid until the session is closed. It
// lets this host say "your session was lost" rather than "not found" after
// the server has forgotten the slot, and lets doctor find sessions whose
// process died and files that outlived their session.
//
// It also holds this host's last write of the session: its revision, TTL
// and record, written together (the file is replaced whole). While that
// revision is still the slot's last, the record stored is that one, so
// CommitSlot and CloseSlot write on it with one compare-and-set and no
// read; once it is not, the compare-and-set is refused and they read.
//
//jsonrec:codec encode
type pidRecord struct {
	Slot     string    `json:"slot"`
	Fence    uint64    `json:"fence"`
	Host     string    `json:"host"`
	Instance string    `json:"instance"`
	PID      int       `json:"pid"`
	PIDStart string    `json:"pid_start,omitempty"`
	Joined   time.Time `json:"joined"`
	// Revision, TTLSeconds and Record are this host's last write of the
	// session (absent in files of earlier versions).
	Revision   uint64          `json:"revision,omitempty"`
	TTLSeconds int64           `json:"ttl_seconds,omitempty"`
	Record     json.RawMessage `json:"record,omitempty"`
}

// MarshalJSON writes t as encoding/json would write its fields, without
// its reflection.
func (t pidRecord) MarshalJSON() ([]byte, error) {
	if b, ok := t.encodeFast(); ok {
		return b, nil
	}
	type fields pidRecord // without this method
	return json.Marshal(fields(t))
}

// writePIDFile records s on this host, with joined the time of its join. A
// failure costs only diagnostics (and the next CommitSlot a read), so it is
// not an error of the write it follows.
func (m *Manager) writePIDFile(s *Session, joined time.Time) {
	if !m.pidFiles {
		return
	}
	t := pidRecord{
		Slot: s.Slot, Fence: s.Fence, Host: s.Host, Instance: s.Instance,
		PID: s.PID, PIDStart: s.PIDStart, Joined: joined,
	}
	if rec, err := encodeRecord(s.Record); err == nil {
		t.Revision, t.TTLSeconds, t.Record = s.Revision, int64(s.TTL/time.Second), rec
	}
	_ = m.state.WritePIDFile(m.prefix, gateName(s.Slot), t)
}

// fromPIDFile is this host's session of slot as its pid file last wrote it, when
// the file holds that write and names the session with fence (0: any).
func (m *Manager) fromPIDFile(slot string, fence uint64) (*Session, pidRecord, bool) {
	t, ok := m.readPIDFile(slot)
	if !ok || t.Revision == 0 || len(t.Record) == 0 || t.Slot != slot || (fence != 0 && t.Fence != fence) {
		return nil, t, false
	}
	var r Record
	if err := r.UnmarshalJSON(t.Record); err != nil || r.Slot != slot || r.Fence != t.Fence || r.Host != m.host {
		return nil, t, false
	}
	if kv.ValidateTTL(time.Duration(t.TTLSeconds)*time.Second) != nil {
		return nil, t, false
	}
	return &Session{Record: r, Revision: t.Revision, TTL: time.Duration(t.TTLSeconds) * time.Second}, t, true
}

// readPIDFile returns this host's pid file of slot, if there is one.
func (m *Manager) readPIDFile(slot string) (pidRecord, bool) {
	var t pidRecord
	if !m.pidFiles {
		return t, false
	}
	err := m.state.ReadPIDFile(m.prefix, gateName(slot), &t)
	return t, err == nil
}

// removePIDFile removes the pid file of slot if it belongs to the session with
// fence (0: whatever session it belongs to).
func (m *Manager) removePIDFile(slot string, fence uint64) {
	if t, ok := m.readPIDFile(slot); ok && (fence == 0 || t.Fence == fence) {
		_ = m.state.RemovePIDFile(m.prefix, gateName(slot))
	}
}

// PIDFile is a host-local pid file left by a join, as doctor reads it.
type PIDFile struct {
	// Name is the pid file's name (slot-SLOT).
	Name     string
	Slot     string
	Fence    uint64
	PID      int
	PIDStart string
	Joined   time.Time
	// Unreadable is set when the file does not decode.
	Unreadable bool
}

// PIDFiles lists the pid files of this host's sessions.
func (m *Manager) PIDFiles() ([]PIDFile, error) {
	names, err := m.state.PIDFiles(m.prefix)
	if err != nil {
		return nil, err
	}
	var out []PIDFile
	for _, n := range names {
		var t pidRecord
		if err := m.state.ReadPIDFile(m.prefix, n, &t); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			out = append(out, PIDFile{Name: n, Slot: strings.TrimPrefix(n, "slot-"), Unreadable: true})
			continue
		}
		out = append(out, PIDFile{Name: n, Slot: t.Slot, Fence: t.Fence, PID: t.PID, PIDStart: t.PIDStart, Joined: t.Joined})
	}
	return out, nil
}

// RemovePIDFile removes this host's pid file of slot if it belongs to the
// session with fence (0: whichever), whether or not this manager writes pid
// files.
func (m *Manager) RemovePIDFile(slot string, fence uint64) {
	var t pidRecord
	if err := m.state.ReadPIDFile(m.prefix, gateName(slot), &t); err == nil && (fence == 0 || t.Fence == fence) {
		_ = m.state.RemovePIDFile(m.prefix, gateName(slot))
	}
}

// RemoveOrphanPIDFile removes a pid file that PIDFiles listed, unless its
// session turns out to be live now (a join that landed after the check).
func (m *Manager) RemoveOrphanPIDFile(ctx context.Context, t PIDFile) error {
	if !t.Unreadable {
		s, err := m.Get(ctx, t.Slot)
		switch {
		case err == nil && s.Fence == t.Fence:
			return fmt.Errorf("its session (fence %d) is live now; left alone", t.Fence)
		case err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrUndecodable):
			return err
		}
		var now pidRecord
		if err := m.state.ReadPIDFile(m.prefix, t.Name, &now); err == nil && now.Fence != t.Fence {
			return fmt.Errorf("rewritten by a newer join (fence %d); left alone", now.Fence)
		}
	}
	return m.state.RemovePIDFile(m.prefix, t.Name)
}
