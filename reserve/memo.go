package reserve

// What a handle keeps of each entry of a space between writes, so that a
// write of a space of a thousand reservations costs about what the
// record's bytes cost, not the work of a thousand entries: each entry's
// patterns parsed, and its bytes in the record, for as long as the entry
// is as it was when they were made.

import (
	"bytes"
	"fmt"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/reserve/pattern"
)

// memo is what was worked out from an entry: its JSON as it was read or
// written, if known (while the entry's changing fields are still as in
// at), and its patterns parsed, if done. A copy of the entry carries it
// along. A memo is never changed once made.
//
// An entry's other fields (its id, patterns, mode, holder, TTL and meta)
// are what the reservation is: set when it is made, never changed after,
// by this package or anyone (a holder that wants other paths reserves
// again), and an entry's patterns are never written in place. So they
// need not be compared: a test run checks every memoised encoding against
// a fresh one (verifyMemos), and TestMemo_Fields that every field of
// Entry is one or the other.
type memo struct {
	at   changing
	raw  string
	pats []pattern.Pattern
	pres []prefix     // of pats
	keys [2]prefixKey // of the first two of pres, in the memo itself
	from *string      // &Patterns[0] of the entry pats were parsed from
}

// changing are the fields of an entry that change while it lasts: its
// grant (Waiting, Fence, Since), renewals (Renewed) and the command run
// under it (ChildPID, ChildPIDStart).
type changing struct {
	waiting        bool
	fence          uint64
	since, renewed time.Time
	childPID       int
	childPIDStart  string
}

func changingOf(e *Entry) changing {
	return changing{waiting: e.Waiting, fence: e.Fence, since: e.Since, renewed: e.Renewed, childPID: e.ChildPID, childPIDStart: e.ChildPIDStart}
}

// verifyMemos has encode check each memoised encoding it uses against a
// fresh one, and panic if they differ (set by the package's tests).
var verifyMemos bool

// bare is e without its memo: for an entry handed to a caller.
func (e *Entry) bare() Entry {
	c := *e
	c.memo = nil
	return c
}

// patternsOf reports whether m holds the parsed patterns of e.
func (m *memo) patternsOf(e *Entry) bool {
	return m != nil && m.pats != nil && len(m.pats) == len(e.Patterns) && len(e.Patterns) > 0 && m.from == &e.Patterns[0]
}

// raw is e's JSON, from its memo if e has not changed since, else encoded
// (and memoised in e).
func (e *Entry) raw() (string, error) {
	m := e.memo
	if m != nil && m.raw != "" && len(e.unknown) == 0 && m.at == changingOf(e) {
		if verifyMemos {
			if b, err := e.MarshalJSON(); err != nil || string(b) != m.raw {
				panic(fmt.Sprintf("reserve: entry %s changed, its memo did not: %s, now %s (%v)", e.ID, m.raw, b, err))
			}
		}
		return m.raw, nil
	}
	b, err := e.MarshalJSON()
	if err != nil {
		return "", err
	}
	n := &memo{at: changingOf(e), raw: string(b)}
	if m.patternsOf(e) {
		n.pats, n.pres, n.keys, n.from = m.pats, m.pres, m.keys, m.from
	}
	e.memo = n
	return n.raw, nil
}

// compiledPatterns are e's patterns parsed, and their prefixes, from its
// memo if it has them; parse parses them if not. If keep, what was parsed
// is memoised in e (which no other goroutine may see meanwhile).
func (e *Entry) compiledPatterns(parse func(string) (pattern.Pattern, error), keep bool) ([]pattern.Pattern, []prefix, error) {
	m := e.memo
	if m.patternsOf(e) {
		return m.pats, m.pres, nil
	}
	pats := make([]pattern.Pattern, len(e.Patterns))
	pres := make([]prefix, len(e.Patterns))
	for i, p := range e.Patterns {
		c, err := parse(p)
		if err != nil {
			return nil, nil, err
		}
		pats[i], pres[i] = c, prefixOf(c)
	}
	if !keep || len(e.Patterns) == 0 {
		return pats, pres, nil
	}
	n := &memo{pats: pats, pres: pres, from: &e.Patterns[0]}
	for i := range min(len(pres), len(n.keys)) {
		n.keys[i] = pres[i].prefixKey
	}
	if m != nil {
		n.at, n.raw = m.at, m.raw
	}
	e.memo = n
	return pats, pres, nil
}

// entriesAt is where the entries go in the JSON of a record whose
// entries are empty: after `"entries":[`.
var entriesAt = []byte(`"entries":[]`)

// encode is r's JSON, as MarshalJSON writes it, each entry's bytes as
// they were read or last written unless it has changed since (the
// entries are memoised anew). buf, if large enough, holds it.
func (r *Record) encode(buf []byte) ([]byte, error) {
	if len(r.unknown) > 0 {
		// Members of a later version beside the entries: written the
		// general way, which sorts them.
		return r.MarshalJSON()
	}
	shell := *r
	shell.Entries = []Entry{}
	head, err := shell.MarshalJSON()
	if err != nil {
		return nil, err
	}
	// The record's own member: the first, as space comes before it and a
	// string cannot hold it unescaped.
	at := bytes.Index(head, entriesAt)
	if at < 0 {
		return r.MarshalJSON()
	}
	at += len(entriesAt) - 1
	size := len(head) + len(r.Entries)
	for i := range r.Entries {
		raw, err := r.Entries[i].raw() // memoised, for the loop below
		if err != nil {
			return nil, err
		}
		size += len(raw)
	}
	out := buf[:0]
	if cap(out) < size {
		out = make([]byte, 0, size)
	}
	out = append(out, head[:at]...)
	for i := range r.Entries {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, r.Entries[i].memo.raw...)
	}
	return append(out, head[at:]...), nil
}

// decodeRecord decodes a record as decodeFast does (reporting false for
// anything it would not read), its strings parts of one copy of data,
// and memoises each entry's bytes if asked.
func decodeRecord(data []byte, memoise bool) (Record, bool) {
	src := string(data)
	s := jsonrec.NewScannerIn(data, src)
	var r Record
	if !s.Lit(`{"space":`) || !s.Str(&r.Space) || !s.Lit(`,"entries":[`) {
		return Record{}, false
	}
	n := bytes.Count(data, []byte(`{"id":`))
	r.Entries = make([]Entry, 0, n)
	var memos []memo
	if memoise {
		memos = make([]memo, n) // one allocation for them all
	}
	if !s.Lit(`]`) {
		for {
			start := len(data) - s.Len()
			r.Entries = append(r.Entries, Entry{})
			e := &r.Entries[len(r.Entries)-1]
			if !e.scanJSON(s, 0) {
				return Record{}, false
			}
			if k := len(r.Entries) - 1; k < len(memos) {
				memos[k] = memo{at: changingOf(e), raw: src[start : len(data)-s.Len()]}
				e.memo = &memos[k]
			} else if memoise {
				e.memo = &memo{at: changingOf(e), raw: src[start : len(data)-s.Len()]}
			}
			if s.Lit(`]`) {
				break
			}
			if !s.Lit(`,`) {
				return Record{}, false
			}
		}
	}
	if !s.Lit(`,"writer":`) || !s.Str(&r.Writer) || !s.Lit(`,"written_at":`) || !s.Time(&r.WrittenAt) || !s.Lit(`}`) || !s.Done() {
		return Record{}, false
	}
	return r, true
}
