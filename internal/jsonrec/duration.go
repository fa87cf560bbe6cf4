package jsonrec

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written in records as "10s"; it reads that
// form or a number of nanoseconds.
type Duration time.Duration

// MarshalJSON writes d like "10s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "10s", or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		*d = Duration(v)
		return err
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(n)
	return nil
}

// String is the duration as time.Duration prints it.
func (d Duration) String() string { return time.Duration(d).String() }
