package rate

import (
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
)

//go:generate go run ../internal/jsonrec/recgen

// Limiter is a rate limiter as stored in KV under rate.<name>: its limits
// and the takes still inside its longest period. Its limits never change
// once written, so callers cannot disagree about them.
//
//jsonrec:codec
type Limiter struct {
	Name      string    `json:"name"`
	Limits    []Limit   `json:"limits"`
	CreatedAt time.Time `json:"created_at"`
	// Log is the takes admitted before the last one that are still inside
	// the longest period, oldest first, each with the server's time of the
	// write that admitted it.
	Log []Take `json:"log"`
	// Last is the take this revision admitted; its time is the revision's
	// (the server's time of this write), which its writer cannot know.
	Last *Take `json:"last,omitempty"`

	unknown jsonrec.Unknown
}

// Limit is one limit of a limiter: at most Max plus Burst in any window
// of Period, counting each take's cost, or each take as 1 (Per "take").
type Limit struct {
	Max    int64            `json:"max"`
	Period jsonrec.Duration `json:"period"`
	Burst  int64            `json:"burst,omitempty"`
	// Per is what it counts: PerCost or PerTake.
	Per string `json:"per"`
}

// What a limit counts.
const (
	PerCost = "cost"
	PerTake = "take"
)

// Take is one admitted take.
type Take struct {
	ID   string `json:"id"`
	Cost int64  `json:"cost"`
	// At is the server's time of the write that admitted it (zero in a
	// record's Last: the record's own time).
	At time.Time `json:"at,omitzero"`
}

type limiterFields Limiter

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (l Limiter) MarshalJSON() ([]byte, error) {
	if l.Log == nil {
		l.Log = []Take{}
	}
	if len(l.unknown) == 0 {
		if b, ok := l.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(limiterFields(l), l.unknown)
}

// UnmarshalJSON reads the known fields and keeps the others.
func (l *Limiter) UnmarshalJSON(data []byte) error {
	if l.decodeFast(data, 0) {
		return nil
	}
	var f limiterFields
	unknown, err := jsonrec.Unmarshal(data, &f, limiterKnown)
	if err != nil {
		return err
	}
	*l = Limiter(f)
	l.unknown = unknown
	return nil
}

func limiterKey(name string) string { return "rate." + name }
