package reserve

import (
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
)

//go:generate go run ../internal/jsonrec/recgen

// Record is a reservation space as stored in KV under resv.<space>: every
// reservation held in it and every one waiting, in the order they came
// (adr/0056). It is rewritten whole, by compare-and-set, at every change,
// so that one write decides a reservation against all the others.
//
//jsonrec:codec
type Record struct {
	Space   string  `json:"space"`
	Entries []Entry `json:"entries"`
	// Writer is the reservation whose change wrote this revision, and
	// WrittenAt the writer's clock (informational): together they make
	// each write's bytes its own.
	Writer    string    `json:"writer"`
	WrittenAt time.Time `json:"written_at"`

	unknown jsonrec.Unknown
}

// Entry is one reservation of a space: held, or waiting for its turn.
//
// Times and the fence are the server's. A zero Since or Renewed, or a
// zero Fence of a held entry, stands for the revision that holds the
// record (its writer cannot know the time or the revision of its own
// write): the next writer that read that revision writes them out.
//
//jsonrec:codec
type Entry struct {
	ID       string   `json:"id"`
	Patterns []string `json:"patterns"`
	Shared   bool     `json:"shared,omitempty"`
	// Waiting marks a reservation in line: it holds nothing yet, and the
	// writer that finds its patterns free of every held reservation and
	// of every waiting one before it makes it held.
	Waiting bool   `json:"waiting,omitempty"`
	Agent   string `json:"agent,omitempty"`
	Task    string `json:"task,omitempty"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	// PIDStart is PID's start token (hostlocal.Process.Start).
	PIDStart string `json:"pid_start,omitempty"`
	// ChildPID is the command run under the reservation (baton reserve
	// run's), 0 if none: its process group must be gone too before this
	// host frees the reservation.
	ChildPID      int    `json:"child_pid,omitempty"`
	ChildPIDStart string `json:"child_pid_start,omitempty"`
	// Fence is the revision at which the reservation was granted: higher
	// for every reservation granted later in the space.
	Fence uint64 `json:"fence,omitempty"`
	// TTL is how long the reservation lives after Renewed.
	TTL jsonrec.Duration `json:"ttl"`
	// Since is when it was granted (or, waiting, when it began to wait).
	Since time.Time `json:"since,omitzero"`
	// Renewed is the server's time of its last renewal: it is alive until
	// Renewed + TTL.
	Renewed time.Time         `json:"renewed,omitzero"`
	Meta    map[string]string `json:"meta,omitempty"`

	unknown jsonrec.Unknown
	// memo is what a handle worked out from the entry (memo.go).
	memo *memo
}

type recordFields Record

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (r Record) MarshalJSON() ([]byte, error) {
	if r.Entries == nil {
		r.Entries = []Entry{}
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
	var f recordFields
	unknown, err := jsonrec.Unmarshal(data, &f, recordKnown)
	if err != nil {
		return err
	}
	*r = Record(f)
	r.unknown = unknown
	return nil
}

type entryFields Entry

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (e Entry) MarshalJSON() ([]byte, error) {
	if len(e.unknown) == 0 {
		if b, ok := e.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(entryFields(e), e.unknown)
}

// UnmarshalJSON reads the known fields and keeps the others.
func (e *Entry) UnmarshalJSON(data []byte) error {
	if e.decodeFast(data, 0) {
		return nil
	}
	var f entryFields
	unknown, err := jsonrec.Unmarshal(data, &f, entryKnown)
	if err != nil {
		return err
	}
	*e = Entry(f)
	e.unknown = unknown
	return nil
}
