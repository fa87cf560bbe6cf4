package lease

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/kv"
)

//go:generate go run ../internal/jsonrec/recgen

// Record is a lease as stored in KV (docs/CONTRACT.md, "Records"). Fields
// this version does not know are kept when the record is rewritten. Its
// layout is its fields and their tags; codec_gen.go is written from them.
//
//jsonrec:codec
type Record struct {
	Key    string `json:"key"`
	Holder string `json:"holder"` // instance id
	Host   string `json:"host"`
	PID    int    `json:"pid"`
	// PIDStart is PID's start token (hostlocal.Process.Start).
	PIDStart string `json:"pid_start,omitempty"`
	// ChildPID is the work the holder runs for the lease (baton lead's
	// command), 0 if none.
	ChildPID      int    `json:"child_pid"`
	ChildPIDStart string `json:"child_pid_start,omitempty"`
	// Fence is the revision at which the holder got the lease. The write
	// that gives a holder the lease stores 0, meaning "this revision";
	// every later write stores it; decoded records always carry it.
	Fence      uint64    `json:"fence"`
	TTL        Duration  `json:"ttl"`
	AcquiredAt time.Time `json:"acquired_at"`
	RenewedAt  time.Time `json:"renewed_at"`
	Renewals   uint64    `json:"renewals"`
	// TransferTo asks the holder to hand the lease to that instance.
	TransferTo string `json:"transfer_to"`
	// PrevHolder and PrevFence name the holder a handover took the lease
	// from, so that a watcher that missed that holder's term still sees it.
	PrevHolder string `json:"prev_holder,omitempty"`
	PrevFence  uint64 `json:"prev_fence,omitempty"`
	// Chosen: leadership was handed to this holder by an explicit transfer;
	// a better-scored candidate does not take it back.
	Chosen       bool     `json:"chosen,omitempty"`
	Score        int      `json:"score"`
	Capabilities []string `json:"capabilities"`
	// Require is, in a candidacy (and its leader's lease), the capabilities
	// its election requires of a leader, as this instance was told: a
	// candidate without them may not lead (Eligible).
	Require []string          `json:"require,omitempty"`
	Meta    map[string]string `json:"meta"`

	unknown jsonrec.Unknown
}

// Duration is a time.Duration written as "10s" (it reads a number of
// nanoseconds too).
type Duration = jsonrec.Duration

type recordFields Record

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (r Record) MarshalJSON() ([]byte, error) {
	if r.Meta == nil {
		r.Meta = map[string]string{}
	}
	if r.Capabilities == nil {
		r.Capabilities = []string{}
	}
	if len(r.unknown) == 0 {
		if b, ok := r.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(recordFields(r), r.unknown)
}

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

func (r Record) clone() Record {
	r.Meta = maps.Clone(r.Meta)
	r.Capabilities = slices.Clone(r.Capabilities)
	r.unknown = r.unknown.Clone()
	return r
}

// Eligible reports whether the holder has every capability its own
// election requires (Require).
func (r Record) Eligible() bool { return r.HasAll(r.Require) }

// HasAll reports whether the record's capabilities include every one of caps.
func (r Record) HasAll(caps []string) bool {
	for _, c := range caps {
		if !slices.Contains(r.Capabilities, c) {
			return false
		}
	}
	return true
}

// Info is a lease as read from the server: its record with the revision,
// the server's time of that revision, and the TTL the server holds.
type Info struct {
	Record
	Revision uint64
	Written  time.Time
	TTL      time.Duration
}

// releaseNote is what a released lease's tombstone says.
//
//jsonrec:codec encode
type releaseNote struct {
	Key      string    `json:"key"`
	Holder   string    `json:"holder"`
	Fence    uint64    `json:"fence"`
	Released time.Time `json:"released_at"`
}

// encode is json.Marshal(n), written member by member where it can be.
func (n releaseNote) encode() ([]byte, error) {
	if b, ok := n.encodeFast(); ok {
		return b, nil
	}
	return json.Marshal(n)
}

func encode(r Record) ([]byte, error) {
	b, err := r.MarshalJSON() // directly: json.Marshal would validate and compact it again
	if err != nil {
		return nil, fmt.Errorf("lease: encode %s: %w", r.Key, err)
	}
	return b, nil
}

// decode turns a KV entry (live, or a tombstone carrying a note) into a
// record, failing on anything that is not a lease of that key.
func decode(e kv.Entry) (*Info, error) {
	var r Record
	if err := r.UnmarshalJSON(e.Value); err != nil {
		return nil, err
	}
	if r.Key != e.Key {
		return nil, fmt.Errorf("record names key %q, stored under %q", r.Key, e.Key)
	}
	if r.Holder == "" {
		return nil, fmt.Errorf("record has no holder")
	}
	if r.Fence == 0 {
		r.Fence = e.Revision
	}
	return &Info{Record: r, Revision: e.Revision, Written: e.Created, TTL: e.TTL}, nil
}
