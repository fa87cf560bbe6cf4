package session

import (
	"fmt"
	"maps"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/kv"
)

//go:generate go run ../internal/jsonrec/recgen

// Record is a session as stored in KV (docs/CONTRACT.md, "Records"). JSON fields
// evolve additively: fields this version does not know are kept when the
// record is rewritten, and readers ignore fields they do not know. Its
// layout is its fields and their tags; codec_gen.go is written from them.
//
//jsonrec:codec
type Record struct {
	Slot    string `json:"slot"`
	TaskID  string `json:"task_id"`
	AgentID string `json:"agent_id"`
	Host    string `json:"host"`
	// PID works the slot: by default the agent that called baton.
	PID int `json:"pid"`
	// PIDStart is the start token of PID (hostlocal.Process.Start), so a
	// recycled pid is not mistaken for the holder.
	PIDStart string `json:"pid_start,omitempty"`
	Instance string `json:"instance"`
	// Fence is the revision that created the session. The first revision
	// stores 0, which means "this revision" (a record cannot know its own
	// revision before it is written); decoded sessions always carry it.
	Fence     uint64    `json:"fence"`
	StartedAt time.Time `json:"started_at"`
	RenewedAt time.Time `json:"renewed_at"`
	Renewals  uint64    `json:"renewals"`
	Message   string    `json:"message"`
	// Result is set in the tombstone a close leaves: success, fail, fork,
	// or what removed it (replaced, reaped).
	Result string            `json:"result"`
	Meta   map[string]string `json:"meta"`

	unknown jsonrec.Unknown
}

// recordFields is Record without its methods, for encoding/json.
type recordFields Record

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (r Record) MarshalJSON() ([]byte, error) {
	if r.Meta == nil {
		r.Meta = map[string]string{}
	}
	if len(r.unknown) == 0 {
		if b, ok := r.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(recordFields(r), r.unknown)
}

// HasUnknownFields reports whether r carries fields of a later version
// that this one does not know (kept as they were read).
func (r Record) HasUnknownFields() bool { return len(r.unknown) > 0 }

// UnmarshalJSON reads the known fields and keeps the others.
func (r *Record) UnmarshalJSON(data []byte) error {
	if r.decodeFast(data, 0) {
		return nil
	}
	return r.unmarshalGeneral(data)
}

// unmarshalGeneral is UnmarshalJSON for any record, of any version.
func (r *Record) unmarshalGeneral(data []byte) error {
	var f recordFields
	unknown, err := jsonrec.Unmarshal(data, &f, recordKnown)
	if err != nil {
		return err
	}
	*r = Record(f)
	r.unknown = unknown
	return nil
}

// clone copies r deeply enough that changing the copy leaves r alone.
func (r Record) clone() Record {
	r.Meta = maps.Clone(r.Meta)
	r.unknown = r.unknown.Clone()
	return r
}

// Results a closing record can carry: the three a holder gives, and the
// ones baton writes when it removes a session itself.
const (
	ResultSuccess = "success"
	ResultFail    = "fail"
	ResultFork    = "fork"
	// ResultReplaced: a forced join on the same host took the slot.
	ResultReplaced = "replaced"
	// ResultReaped: doctor --fix removed it as stale.
	ResultReaped = "reaped"
	// ResultSpawnFailed: Join removed it because the spawn failed.
	ResultSpawnFailed = "spawn-failed"
)

// Session is a record read from or written to the server, with the
// revision and timing the server gave it.
type Session struct {
	Record
	// Revision is the KV revision of this version of the record; renewals
	// and closes are compare-and-sets on it.
	Revision uint64
	// Written is the server's time of Revision (zero for a session returned
	// by a write: the server's acknowledgement carries no time).
	Written time.Time
	// TTL is the session's time to live, restarted by every renewal.
	TTL time.Duration
}

// encodeRecord is the JSON stored for r.
func encodeRecord(r Record) ([]byte, error) {
	b, err := r.MarshalJSON() // directly: json.Marshal would validate and compact it again
	if err != nil {
		return nil, fmt.Errorf("session: encode record %s: %w", r.Slot, err)
	}
	return b, nil
}

// Decode turns an entry of the sessions bucket (a live session, or the
// record a closed session's tombstone carries) into a session, as every
// reader of this package does, or reports why it cannot: not JSON, not an
// object, or naming another slot. A record's fence is its creation
// revision where the record stores 0.
func Decode(e kv.Entry) (*Session, error) {
	// Decoded in place: a listing decodes 100k of them.
	s := &Session{Revision: e.Revision, Written: e.Created, TTL: e.TTL}
	if err := s.Record.UnmarshalJSON(e.Value); err != nil {
		return nil, err
	}
	if s.Slot != e.Key {
		return nil, fmt.Errorf("record names slot %q, stored under %q", s.Slot, e.Key)
	}
	if s.Fence == 0 {
		s.Fence = e.Revision
	}
	return s, nil
}
