package reserve

// Reading a space: its reservations with their state (Status), whether
// paths are free to write (Check), and every space (List).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/reserve/pattern"
)

// Row is one reservation of a space as Status shows it.
type Row struct {
	Entry
	// State is "held", "waiting", or "expired" (past its TTL: the next
	// write of the space removes it).
	State string `json:"state"`
	// AgeMS is how long it has been held (or waiting); TTLLeftMS how long
	// until it expires unless renewed. Both by the server's clock.
	AgeMS     int64 `json:"age_ms"`
	TTLLeftMS int64 `json:"ttl_left_ms"`
}

// MarshalJSON writes the entry's fields and the row's own beside them.
func (r Row) MarshalJSON() ([]byte, error) {
	b, err := r.Entry.MarshalJSON()
	if err != nil || len(b) < 2 || b[len(b)-1] != '}' {
		return b, err
	}
	b = append(b[:len(b)-1], `,"state":`...)
	b = strconv.AppendQuote(b, r.State)
	b = append(b, `,"age_ms":`...)
	b = strconv.AppendInt(b, r.AgeMS, 10)
	b = append(b, `,"ttl_left_ms":`...)
	b = strconv.AppendInt(b, r.TTLLeftMS, 10)
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Row) UnmarshalJSON(data []byte) error {
	var own struct {
		State     string `json:"state"`
		AgeMS     int64  `json:"age_ms"`
		TTLLeftMS int64  `json:"ttl_left_ms"`
	}
	if err := json.Unmarshal(data, &own); err != nil {
		return err
	}
	if err := r.Entry.UnmarshalJSON(data); err != nil {
		return err
	}
	r.State, r.AgeMS, r.TTLLeftMS = own.State, own.AgeMS, own.TTLLeftMS
	for _, k := range []string{"state", "age_ms", "ttl_left_ms"} {
		delete(r.Entry.unknown, k) // the row's, not the entry's
	}
	return nil
}

// Status is a space as read at one revision.
type Status struct {
	Space        string    `json:"space"`
	Revision     uint64    `json:"revision"`
	ServerTime   time.Time `json:"server_time"`
	Reservations []Row     `json:"reservations"`
	// Size is the record's size in bytes: a space holds at most as many
	// reservations as fit in one message of the server's.
	Size int `json:"size"`
}

// Held counts the reservations held (not waiting, not expired).
func (st Status) Held() int {
	n := 0
	for _, r := range st.Reservations {
		if r.State == "held" {
			n++
		}
	}
	return n
}

// Status reads space: every reservation in it, held and waiting, at the
// server's time of the read.
func (s *Spaces) Status(ctx context.Context, space string) (Status, error) {
	if err := ValidSpace(space); err != nil {
		return Status{}, err
	}
	e, err := s.bucket.Latest(ctx, Key(space))
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return Status{}, err
	}
	now, err := s.bucket.ServerTime(ctx)
	if err != nil {
		return Status{}, err
	}
	if e.Revision == 0 {
		return Status{Space: space, ServerTime: now, Reservations: []Row{}}, nil
	}
	return statusOf(space, e, now)
}

// StatusOf is the status of a space from an entry of its key (read, or
// delivered by a watch) at server time now (zero: the entry's own).
func StatusOf(space string, e kv.Entry, now time.Time) (Status, error) {
	if now.IsZero() {
		now = e.Created
	}
	return statusOf(space, e, now)
}

func statusOf(space string, e kv.Entry, now time.Time) (Status, error) {
	st, err := decodeState(space, e, false)
	if err != nil {
		return Status{}, err
	}
	out := Status{Space: space, Revision: e.Revision, ServerTime: now, Size: len(e.Value), Reservations: make([]Row, 0, len(st.rec.Entries))}
	for _, en := range st.rec.Entries {
		out.Reservations = append(out.Reservations, rowAt(en, now))
	}
	return out, nil
}

// At is the status as of a later server time now: each reservation's
// state, age and time left counted again, for a reader that keeps a
// status while time passes (the dashboard) without decoding the record
// again. Nothing else changes: no write is seen.
func (st Status) At(now time.Time) Status {
	out := st
	out.ServerTime = now
	out.Reservations = make([]Row, len(st.Reservations))
	for i, r := range st.Reservations {
		out.Reservations[i] = rowAt(r.Entry, now)
	}
	return out
}

// rowAt is entry en as a row at server time now.
func rowAt(en Entry, now time.Time) Row {
	r := Row{Entry: en, State: "held"}
	if en.Waiting {
		r.State = "waiting"
	}
	if en.expired(now) {
		r.State = "expired"
	}
	if !en.Since.IsZero() && now.After(en.Since) {
		r.AgeMS = now.Sub(en.Since).Milliseconds()
	}
	if exp := en.ExpiresAt(); exp.After(now) {
		r.TTLLeftMS = exp.Sub(now).Milliseconds()
	}
	return r
}

// List reads every space's record, by space name.
func (s *Spaces) List(ctx context.Context) ([]Status, error) {
	es, err := s.bucket.Entries(ctx, KeyPrefix+">")
	if err != nil {
		return nil, err
	}
	now, err := s.bucket.ServerTime(ctx)
	if err != nil {
		return nil, err
	}
	var out []Status
	for _, e := range es {
		var r Record
		if err := r.UnmarshalJSON(e.Value); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUndecodable, e.Key, err)
		}
		st, err := statusOf(r.Space, e, now)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Space, b.Space) })
	return out, nil
}

// CheckOption configures Check.
type CheckOption func(*checkConfig)

type checkConfig struct {
	shared    bool
	mine      []string
	as        []hostlocal.Process
	lineageOf func() ([]hostlocal.Process, error)
}

// ForReading checks paths for reading: only exclusive reservations of
// others are in the way. Default: for writing, where every reservation
// of others is.
func ForReading() CheckOption { return func(c *checkConfig) { c.shared = true } }

// Mine names reservations that are the caller's own: they are never in
// its way.
func Mine(ids ...string) CheckOption {
	return func(c *checkConfig) { c.mine = append(c.mine, ids...) }
}

// As names the caller's process lineage (hostlocal.Lineage): a
// reservation of this host held by one of these processes (the agent that
// runs the caller, or baton reserve run above it) is the caller's own.
func As(lineage []hostlocal.Process) CheckOption {
	return func(c *checkConfig) { c.as = append(c.as, lineage...) }
}

// AsLineageOf is As(hostlocal.Lineage(pid)), looked up only when a
// reservation of this host is in the way of the paths checked: a check
// that finds them free, or held on other hosts only, reads nothing of
// this host's processes. A process it cannot look up owns nothing.
func AsLineageOf(pid int) CheckOption {
	return func(c *checkConfig) {
		c.lineageOf = func() ([]hostlocal.Process, error) { return hostlocal.Lineage(pid) }
	}
}

// Check reports the reservations of others in the way of writing (or
// reading) paths, each a plain path of the space (a file or a directory,
// taken literally): every held reservation whose patterns cover a path or
// something beneath it. Waiting reservations hold nothing and are not
// reported. No conflicts and a nil error mean the paths are free.
//
// It reads the space, and decides at the time of the record's revision:
// a reservation expired then is expired now. When one alive then is in
// the way, it reads the server's clock too and decides again, so that a
// reservation whose TTL has run out since is not reported: paths found
// free cost one round trip.
func (s *Spaces) Check(ctx context.Context, space string, paths []string, opts ...CheckOption) ([]Conflict, error) {
	var cfg checkConfig
	for _, o := range opts {
		o(&cfg)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no path to check", ErrInvalid)
	}
	lits := make([]pattern.Pattern, len(paths))
	for i, p := range paths {
		l, err := pattern.Literal(p)
		if err != nil {
			return nil, invalidError{err}
		}
		lits[i] = l
	}
	if err := ValidSpace(space); err != nil {
		return nil, err
	}
	e, err := s.bucket.Latest(ctx, Key(space))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil // never written
	}
	if err != nil {
		return nil, err
	}
	st, err := decodeState(space, e, false)
	if err != nil {
		return nil, err
	}
	in, err := s.inTheWayOf(st, lits, &cfg, e.Created)
	if err != nil || len(in) == 0 {
		return nil, err
	}
	now, err := s.bucket.ServerTime(ctx)
	if err != nil {
		return nil, err
	}
	var out []Conflict
	for _, b := range in {
		if b.entry.expired(now) {
			continue
		}
		var age time.Duration
		if since := b.entry.Since; !since.IsZero() && now.After(since) {
			age = now.Sub(since).Truncate(time.Millisecond)
		}
		out = append(out, Conflict{Pattern: lits[b.mine].String(), Theirs: b.entry.Patterns[b.theirs], Holder: b.entry.bare(), Age: age})
	}
	return out, nil
}

// inTheWayOf are the held entries of st, alive at d, not the caller's,
// that clash with lits: for each, the first pair of patterns in the way.
// Only the entries whose patterns may meet a path (pattern.Apart) are
// parsed, and the caller's lineage is looked up only for one of this
// host in the way.
func (s *Spaces) inTheWayOf(st *state, lits []pattern.Pattern, cfg *checkConfig, d time.Time) ([]blocker, error) {
	var out []blocker
	for i := range st.rec.Entries {
		e := &st.rec.Entries[i]
		if e.Waiting || e.expired(d) || slices.Contains(cfg.mine, e.ID) || apart(e.Patterns, lits) {
			continue
		}
		pats, _, err := e.compiledPatterns(s.parse, false)
		if err != nil {
			return nil, fmt.Errorf("%w: space %s, reservation %s: %w", ErrUndecodable, st.rec.Space, e.ID, err)
		}
		c, ok := clash(lits, cfg.shared, pats, e.Shared)
		if !ok {
			continue
		}
		if e.Host == s.host {
			if cfg.lineageOf != nil {
				if lineage, err := cfg.lineageOf(); err == nil {
					cfg.as = append(cfg.as, lineage...)
				}
				cfg.lineageOf = nil
			}
			if s.OwnedBy(e, cfg.as) {
				continue
			}
		}
		out = append(out, blocker{entry: e, conflict: c})
	}
	return out, nil
}

// apart reports whether no pattern of pats can overlap any of lits, as
// written (pattern.Apart), without parsing them.
func apart(pats []string, lits []pattern.Pattern) bool {
	for _, p := range pats {
		for _, l := range lits {
			if !pattern.Apart(p, l.String()) {
				return false
			}
		}
	}
	return true
}

// OwnedBy reports whether e is held on this host by one of the processes
// (its holder, or the command it runs).
func (s *Spaces) OwnedBy(e *Entry, lineage []hostlocal.Process) bool {
	if e.Host != s.host {
		return false
	}
	for _, p := range lineage {
		if (p.PID == e.PID && sameStart(p.Start, e.PIDStart)) || (e.ChildPID > 0 && p.PID == e.ChildPID && sameStart(p.Start, e.ChildPIDStart)) {
			return true
		}
	}
	return false
}

func sameStart(a, b string) bool { return a == "" || b == "" || a == b }
