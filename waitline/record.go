package waitline

import (
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
)

//go:generate go run ../internal/jsonrec/recgen

// Ticket is a waiter's record, under <line>.<id> with the line's TTL.
//
//jsonrec:codec
type Ticket struct {
	ID       string `json:"id"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	PIDStart string `json:"pid_start,omitempty"`
	// Weight is how much the waiter asks for (a semaphore's units).
	Weight int `json:"weight,omitempty"`
	// First is the revision at which the ticket was created: its place in
	// the line. The creating write stores 0, meaning "this revision".
	First   uint64    `json:"first,omitempty"`
	Since   time.Time `json:"since"`
	Renewed time.Time `json:"renewed_at,omitempty"`

	unknown jsonrec.Unknown
}

type ticketFields Ticket

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (t Ticket) MarshalJSON() ([]byte, error) {
	if len(t.unknown) == 0 {
		if b, ok := t.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(ticketFields(t), t.unknown)
}

// UnmarshalJSON reads the known fields and keeps the others.
func (t *Ticket) UnmarshalJSON(data []byte) error {
	if t.decodeFast(data, 0) {
		return nil
	}
	var f ticketFields
	unknown, err := jsonrec.Unmarshal(data, &f, ticketKnown)
	if err != nil {
		return err
	}
	*t = Ticket(f)
	t.unknown = unknown
	return nil
}
