package sem

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/internal/names"
	"github.com/batonhq/baton/kv"
)

//go:generate go run ../internal/jsonrec/recgen

// Config is a semaphore as stored in KV under sem.<name>
// (docs/CONTRACT.md, "Records"). It has no TTL and never changes once
// written: every caller reads max from it, so callers cannot disagree
// about it.
//
//jsonrec:codec
type Config struct {
	Name string `json:"name"`
	// Max is how many units the semaphore has across every host; 0 for a
	// per-host semaphore, so that a baton which predates those reads its
	// record as one it cannot use, never as a semaphore of every host.
	Max int `json:"max"`
	// MaxPerHost, for a per-host semaphore, is how many units each host
	// has, apart from every other host's.
	MaxPerHost int       `json:"max_per_host,omitempty"`
	CreatedAt  time.Time `json:"created_at"`

	unknown jsonrec.Unknown
}

// Units is how many units one of the semaphore's scopes has: Max, or
// MaxPerHost on each host.
func (c Config) Units() int {
	if c.MaxPerHost > 0 {
		return c.MaxPerHost
	}
	return c.Max
}

// PerHost reports whether each host has Units of its own.
func (c Config) PerHost() bool { return c.MaxPerHost > 0 }

// space is where the semaphore's units and line live for host:
// sem.<name>.<unit> and sem.<name>.w.<ticket> for a semaphore of every
// host; sem.<name>.h.<host>.<unit> and sem.<name>.h.<host>.w.<ticket>
// for a per-host one (the host id as it is when it is a plain name, else
// "=" and a hash of it: host ids may hold any character but space).
func (c Config) space(host string) string {
	if !c.PerHost() {
		return c.Name
	}
	return c.Name + ".h." + hostToken(host)
}

func hostToken(host string) string {
	if names.Plain(host, 64) {
		return host
	}
	sum := sha256.Sum256([]byte(host))
	return "=" + hex.EncodeToString(sum[:8])
}

type configFields Config

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (c Config) MarshalJSON() ([]byte, error) {
	if len(c.unknown) == 0 {
		if b, ok := c.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(configFields(c), c.unknown)
}

// UnmarshalJSON reads the known fields and keeps the others.
func (c *Config) UnmarshalJSON(data []byte) error {
	if c.decodeFast(data, 0) {
		return nil
	}
	var f configFields
	unknown, err := jsonrec.Unmarshal(data, &f, configKnown)
	if err != nil {
		return err
	}
	*c = Config(f)
	c.unknown = unknown
	return nil
}

// Unit is one held unit of a semaphore, stored under sem.<name>.<unit>
// with the permit's TTL. A permit of weight W holds W units; each names
// the permit and its index (its lowest unit).
//
//jsonrec:codec
type Unit struct {
	Sem    string `json:"sem"`
	Unit   int    `json:"unit"`
	Permit string `json:"permit"`
	Index  int    `json:"index"`
	Weight int    `json:"weight"`
	Host   string `json:"host"`
	PID    int    `json:"pid"`
	// PIDStart is PID's start token (hostlocal.Process.Start).
	PIDStart string `json:"pid_start,omitempty"`
	// ChildPID is the command the holder runs under the permit (baton sem
	// run's), 0 if none: its process group must be gone too before this
	// host frees the unit.
	ChildPID      int               `json:"child_pid,omitempty"`
	ChildPIDStart string            `json:"child_pid_start,omitempty"`
	AcquiredAt    time.Time         `json:"acquired_at"`
	RenewedAt     time.Time         `json:"renewed_at"`
	Meta          map[string]string `json:"meta,omitempty"`

	unknown jsonrec.Unknown
}

type unitFields Unit

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (u Unit) MarshalJSON() ([]byte, error) {
	if len(u.unknown) == 0 {
		if b, ok := u.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(unitFields(u), u.unknown)
}

// UnmarshalJSON reads the known fields and keeps the others.
func (u *Unit) UnmarshalJSON(data []byte) error {
	if u.decodeFast(data, 0) {
		return nil
	}
	var f unitFields
	unknown, err := jsonrec.Unmarshal(data, &f, unitKnown)
	if err != nil {
		return err
	}
	*u = Unit(f)
	u.unknown = unknown
	return nil
}

// Claim is the first waiter's offer to be handed its units by a holder
// that releases (ADR 0045). It is told on the core NATS subject
// limits.HandoffSubject(prefix, space), never stored: the units the
// holder writes for the waiter copy it. Weight 0 withdraws the claim of
// Permit.
//
//jsonrec:codec
type Claim struct {
	// Ticket is the waiter's ticket's key, and TicketRev its revision when
	// told: the holder deletes the ticket by compare-and-set on it.
	Ticket    string `json:"ticket"`
	TicketRev uint64 `json:"ticket_rev"`
	// Permit begins the id of the permit handed over: <Permit>~<a nonce
	// of the holder's>.
	Permit   string            `json:"permit"`
	Weight   int               `json:"weight"`
	Host     string            `json:"host"`
	PID      int               `json:"pid"`
	PIDStart string            `json:"pid_start,omitempty"`
	TTLMS    int64             `json:"ttl_ms"`
	Meta     map[string]string `json:"meta,omitempty"`

	unknown jsonrec.Unknown
}

type claimFields Claim

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (c Claim) MarshalJSON() ([]byte, error) {
	if len(c.unknown) == 0 {
		if b, ok := c.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(claimFields(c), c.unknown)
}

// UnmarshalJSON reads the known fields and keeps the others.
func (c *Claim) UnmarshalJSON(data []byte) error {
	if c.decodeFast(data, 0) {
		return nil
	}
	var f claimFields
	unknown, err := jsonrec.Unmarshal(data, &f, claimKnown)
	if err != nil {
		return err
	}
	*c = Claim(f)
	c.unknown = unknown
	return nil
}

func (u Unit) clone() Unit {
	u.Meta = maps.Clone(u.Meta)
	u.unknown = u.unknown.Clone()
	return u
}

// configKey is where a semaphore's record lives, unitKey where a unit of
// one of its spaces does (Config.space).
func configKey(name string) string          { return "sem." + name }
func unitKey(space string, unit int) string { return "sem." + space + "." + strconv.Itoa(unit) }

// decodeConfig reads a semaphore's record, failing on anything that is not
// one of that name.
func decodeConfig(name string, e kv.Entry) (Config, error) {
	var c Config
	if err := c.UnmarshalJSON(e.Value); err != nil {
		return c, fmt.Errorf("%w: %s: %w", ErrUndecodable, e.Key, err)
	}
	if c.Name != name || c.Max < 1 && c.MaxPerHost < 1 || c.Max > 0 && c.MaxPerHost > 0 {
		return c, fmt.Errorf("%w: %s: names semaphore %q with max %d and max per host %d", ErrUndecodable, e.Key, c.Name, c.Max, c.MaxPerHost)
	}
	return c, nil
}

// decodeUnit reads a live unit record, failing on anything that is not
// that unit of that semaphore.
func decodeUnit(name string, unit int, e kv.Entry) (Unit, error) {
	var u Unit
	if err := u.UnmarshalJSON(e.Value); err != nil {
		return u, fmt.Errorf("%w: %s: %w", ErrUndecodable, e.Key, err)
	}
	if u.Sem != name || u.Unit != unit || u.Permit == "" || u.Weight < 1 {
		return u, fmt.Errorf("%w: %s: names semaphore %q unit %d permit %q weight %d", ErrUndecodable, e.Key, u.Sem, u.Unit, u.Permit, u.Weight)
	}
	return u, nil
}
