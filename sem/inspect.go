package sem

import (
	"context"
	"strings"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/waitline"
)

// RecordKind says what a record of the limits bucket is.
type RecordKind string

// The kinds of records Inspect reports.
const (
	KindConfig RecordKind = "semaphore"
	KindUnit   RecordKind = "unit"
	KindWaiter RecordKind = "waiter"
)

// Problem is a record of a semaphore that stands in the way: one that
// does not decode, or one held by a process of this host that is dead.
type Problem struct {
	Kind     RecordKind
	Sem      string
	Key      string
	Revision uint64
	Written  time.Time
	TTL      time.Duration // the record's own, 0 if none
	// Err is why it does not decode; nil for a dead holder.
	Err error
	// Host, PID and Permit name a dead holder (or waiter: Permit is its id).
	Host   string
	PID    int
	Permit string
}

// Inspect reads every record of the semaphores and returns the problems:
// records that do not decode (a unit that does not decode is held by
// nobody-knows-who; a semaphore that does not decode cannot be used) and
// units and waiters' tickets of dead processes of this host, which any
// acquirer of this host would free anyway.
func (s *Semaphores) Inspect(ctx context.Context) ([]Problem, error) {
	es, err := s.bucket.Entries(ctx, "sem.>")
	if err != nil {
		return nil, err
	}
	var out []Problem
	for _, e := range es {
		if !e.Live() {
			continue
		}
		p := Problem{Key: e.Key, Revision: e.Revision, Written: e.Created, TTL: e.TTL}
		rest, _ := strings.CutPrefix(e.Key, "sem.")
		name, tail, _ := strings.Cut(rest, ".")
		p.Sem = name
		space := name
		if after, ok := strings.CutPrefix(tail, "h."); ok {
			// A per-host semaphore's space: sem.<name>.h.<host>.<...>.
			tok, more, _ := strings.Cut(after, ".")
			space, tail = name+".h."+tok, more
			if more == "" {
				continue // not a record of baton's
			}
		}
		switch {
		case tail == "":
			p.Kind = KindConfig
			if _, err := decodeConfig(name, e); err != nil {
				p.Err = err
				out = append(out, p)
			}
		case strings.HasPrefix(tail, "w."):
			p.Kind = KindWaiter
			ws := waitline.Parse(lineName(space), []kv.Entry{e})
			if len(ws) == 0 {
				p.Err = errTicket
				out = append(out, p)
				continue
			}
			w := ws[0]
			if s.deadOnThisHost(&Unit{Host: w.Host, PID: w.PID, PIDStart: w.PIDStart}) {
				p.Host, p.PID, p.Permit = w.Host, w.PID, w.ID
				out = append(out, p)
			}
		default:
			p.Kind = KindUnit
			i, ok := unitOf(space, e.Key)
			if !ok {
				continue // not a record of baton's
			}
			u, err := decodeUnit(name, i, e)
			if err != nil {
				p.Err = err
				out = append(out, p)
				continue
			}
			if s.deadOnThisHost(&u) {
				p.Host, p.PID, p.Permit = u.Host, u.PID, u.Permit
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// Reap removes a record Inspect reported, by compare-and-set at the
// revision it saw: one rewritten since is left alone (kv.ErrConflict).
func (s *Semaphores) Reap(ctx context.Context, key string, rev uint64) error {
	return s.bucket.Delete(ctx, key, rev, nil)
}
