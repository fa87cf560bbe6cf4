package sem

// Handing units straight to the first waiter (ADR 0045). The first in
// line tells the holders of its space, on a core NATS subject, what it
// asks for and which ticket is its place (a Claim). A holder that
// releases while it knows of a claim it can serve writes its units over
// for the waiter and deletes the waiter's ticket, in one pipeline: the
// waiter, watching its space and its ticket, holds the permit the moment
// those writes reach it, with no write of its own. The ticket's delete
// is the commit: by compare-and-set on the revision the claim names, it
// fails if the waiter left (gave up) or renewed the ticket since, and
// then the holder frees the units it wrote instead.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/limits"
	"github.com/batonhq/baton/waitline"
)

// claimFresh is how long a holder trusts a claim. The waiter tells it
// again whenever its ticket is renewed (every second), so an older claim
// names a revision gone by, and the handoff would be refused.
const claimFresh = 2 * time.Second

// handedNote is the note of a ticket a holder deleted handing its units
// to the waiter whose permit id follows.
const handedNote = "handed to "

// board is what the holders of a Semaphores know of the first waiters of
// their spaces: the last claim told on each. One subscription, to every
// space of the prefix, made with the first permit held and kept while
// the connection lasts (it ends with it): a permit costs no subscription
// of its own, and a holder of one space drops the others' claims.
type board struct {
	once sync.Once

	mu     sync.Mutex
	claims map[string]heard // by space
}

type heard struct {
	c  Claim
	at time.Time
}

// listen makes sure the board follows the claims; a holder that cannot
// listen releases as it did before handoffs.
func (s *Semaphores) listen() {
	s.claims.once.Do(func() {
		nc := s.bucket.Client().Conn()
		if nc == nil {
			return
		}
		prefix := limits.HandoffSubject(s.prefix, "")
		_, _ = nc.Subscribe(prefix+">", func(m *nats.Msg) {
			var c Claim
			if c.UnmarshalJSON(m.Data) != nil || c.Permit == "" {
				return
			}
			space := m.Subject[len(prefix):]
			b := &s.claims
			b.mu.Lock()
			defer b.mu.Unlock()
			switch {
			case c.Weight > 0:
				b.claims[space] = heard{c: c, at: time.Now()}
			case b.claims[space].c.Permit == c.Permit:
				delete(b.claims, space) // withdrawn
			}
		})
	})
}

// claim is the fresh claim the permit can serve, if any: one that asks
// for no more units than it holds.
func (p *Permit) claim() (Claim, bool) {
	b := &p.s.claims
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.claims[p.space]
	ok = ok && time.Since(h.at) < claimFresh && h.c.Weight <= p.weight && h.c.TTLMS >= 1000
	return h.c, ok
}

// handOff releases the permit by handing its lowest units to the waiter
// of claim c: one pipeline writes them over for the waiter, deletes its
// ticket, and deletes the permit's other units. If the ticket's delete or
// a unit's write is refused, the handoff did not happen, and the units
// written for the waiter are deleted again (by compare-and-set on the
// revisions written), as a release would have. It returns the error of
// the permit's own units, as Release.
func (p *Permit) handOff(ctx context.Context, units []heldUnit, c Claim) error {
	hand, rest := units[:c.Weight], units[c.Weight:]
	now := p.s.now().UTC()
	ws := make([]kv.Write, 0, len(units)+1)
	for _, u := range hand {
		rec := Unit{Sem: p.name, Unit: u.unit, Permit: c.Permit, Index: hand[0].unit, Weight: c.Weight,
			Host: c.Host, PID: c.PID, PIDStart: c.PIDStart, AcquiredAt: now, RenewedAt: now, Meta: c.Meta}
		data, err := rec.MarshalJSON()
		if err != nil {
			return err
		}
		ws = append(ws, kv.Write{Kind: kv.WriteUpdate, Key: unitKey(p.space, u.unit), Value: data,
			TTL: time.Duration(c.TTLMS) * time.Millisecond, Rev: u.rev})
	}
	// The ticket's delete comes after the units, so that the waiter sees
	// them all before it; the other units are freed after it, so that the
	// next waiter, woken by it, may take them.
	ws = append(ws, kv.Write{Kind: kv.WriteDelete, Key: c.Ticket, Rev: c.TicketRev, Value: []byte(handedNote + c.Permit)})
	for _, u := range rest {
		ws = append(ws, kv.Write{Kind: kv.WriteDelete, Key: unitKey(p.space, u.unit), Rev: u.rev})
	}
	res := p.s.bucket.Pipeline(ctx, ws)
	handed := res[len(hand)].Err == nil
	var errs []error
	for i := range hand {
		if res[i].Err != nil {
			handed = false
			errs = append(errs, res[i].Err)
		}
	}
	for i, u := range rest {
		r := res[len(hand)+1+i]
		if r.Err != nil {
			errs = append(errs, r.Err)
			continue
		}
		p.s.setTomb(unitKey(p.space, u.unit), r.Rev)
	}
	if !handed {
		// Free what was written for the waiter: it will not take it.
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.s.bucket.Client().Timeout())
		defer cancel()
		for i, u := range hand {
			if res[i].Err != nil {
				continue
			}
			key := unitKey(p.space, u.unit)
			tomb, err := p.s.bucket.DeleteRevision(undo, key, res[i].Rev, nil)
			if err != nil && !errors.Is(err, kv.ErrConflict) {
				errs = append(errs, err)
				continue
			}
			if err == nil {
				p.s.setTomb(key, tomb)
			}
		}
	}
	return errors.Join(errs...)
}

// handed is the first waiter's side of the handoff: its claim, told again
// whenever its ticket's revision moves, and the units holders have
// written for it so far.
type handed struct {
	s      *Semaphores
	c      Config
	cfg    acquireConfig
	place  *waitline.Place
	permit string
	told   uint64    // the ticket's revision last told; 0: never told
	toldAt time.Time // when it was told
	units  map[int]kv.Entry
}

func (s *Semaphores) newHanded(c Config, cfg acquireConfig, place *waitline.Place) *handed {
	return &handed{s: s, c: c, cfg: cfg, place: place, permit: newPermitID(), units: map[int]kv.Entry{}}
}

// tell tells the holders the claim at the ticket's revision rev, unless
// they have it at rev or a later one. The revision comes from the
// ticket's renewal as the watch delivers it, which may come before the
// renewal's answer does.
func (h *handed) tell(rev uint64) {
	if rev <= h.told {
		return
	}
	c := Claim{Ticket: h.place.Key(), TicketRev: rev, Permit: h.permit, Weight: h.cfg.weight, Host: h.s.host,
		PID: h.s.proc.PID, PIDStart: h.s.proc.Start, TTLMS: h.cfg.ttl.Milliseconds(), Meta: h.cfg.meta}
	if h.publish(c) {
		h.told, h.toldAt = rev, time.Now()
	}
}

// withdraw tells the holders that the claim is void (the waiter took its
// units itself, or stopped waiting).
func (h *handed) withdraw() {
	if h.told != 0 {
		h.publish(Claim{Permit: h.permit})
		h.told = 0
	}
}

func (h *handed) publish(c Claim) bool {
	data, err := c.MarshalJSON()
	if err != nil {
		return false
	}
	nc := h.s.bucket.Client().Conn()
	return nc != nil && nc.Publish(limits.HandoffSubject(h.s.prefix, h.s.space(h.c)), data) == nil
}

// saw notes a live unit i: written for this waiter, or not (any more).
func (h *handed) saw(i int, e kv.Entry) {
	if u, err := decodeUnit(h.c.Name, i, e); err == nil && u.Permit == h.permit {
		h.units[i] = e
		return
	}
	delete(h.units, i)
}

// pending reports units written for the waiter and not yet committed by
// its ticket's delete: it takes nothing of its own meanwhile.
func (h *handed) pending() bool { return len(h.units) > 0 }

// isHandOff reports whether e, the ticket's tombstone, is a holder's
// commit of a handoff to this waiter.
func (h *handed) isHandOff(e kv.Entry) bool {
	return e.Op == kv.OpDelete && string(e.Value) == handedNote+h.permit
}

// accept makes the permit of the units handed, once a holder deleted the
// ticket for them. Had it written fewer than asked for (one of its units
// was lost), the waiter frees those it has and waits again, at the back.
func (h *handed) accept(ctx context.Context) (*Permit, error) {
	h.place.Drop()
	h.told = 0 // the claim was used
	held := make([]heldUnit, 0, len(h.units))
	for i, e := range h.units {
		u, err := decodeUnit(h.c.Name, i, e)
		if err != nil {
			continue
		}
		held = append(held, heldUnit{unit: i, rev: e.Revision, rec: u})
	}
	slices.SortFunc(held, func(a, b heldUnit) int { return a.unit - b.unit })
	if len(held) != h.cfg.weight {
		h.free(ctx, held)
		return nil, errBackInLine
	}
	return h.s.hold(h.c, h.permit, h.cfg, held, h.toldAt), nil
}

// free deletes units written for the waiter that it will not hold.
func (h *handed) free(ctx context.Context, held []heldUnit) {
	undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.s.bucket.Client().Timeout())
	defer cancel()
	for _, u := range held {
		key := unitKey(h.s.space(h.c), u.unit)
		if tomb, err := h.s.bucket.DeleteRevision(undo, key, u.rev, nil); err == nil {
			h.s.setTomb(key, tomb)
		}
	}
}

// abandon is the end of a wait that did not take its units: the claim is
// withdrawn and the place left; if a holder had committed a handoff to it
// meanwhile (the leave lost to the holder's delete of the ticket), the
// units it wrote are read and freed.
func (h *handed) abandon(ctx context.Context) {
	if h.told == 0 {
		return
	}
	h.withdraw()
	h.place.LeaveDetached(ctx)
	if h.place.LeaveErr() != nil {
		h.freeHanded(ctx)
	}
}

// tookItself is the end of a wait that took its units itself (over units
// freed): the claim is withdrawn; if the leave lost to a holder's delete
// of the ticket, that holder committed a handoff too, and the units it
// wrote are read and freed.
func (h *handed) tookItself(ctx context.Context) {
	if h.told == 0 {
		return
	}
	h.withdraw()
	if errors.Is(h.place.LeaveErr(), kv.ErrConflict) {
		h.freeHanded(ctx)
	}
}

// freeHanded reads the units and frees those written for the waiter.
func (h *handed) freeHanded(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.s.bucket.Client().Timeout())
	defer cancel()
	v, err := h.s.read(rctx, h.c)
	if err != nil {
		return
	}
	var mine []heldUnit
	for _, u := range v.units {
		if u.live && u.rec != nil && u.rec.Permit == h.permit {
			mine = append(mine, heldUnit{unit: u.unit, rev: u.rev})
		}
	}
	h.free(ctx, mine)
}
