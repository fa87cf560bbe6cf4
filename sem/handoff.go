package sem

// Handing units straight to the first waiter (ADR 0045). The first in
// line tells the holders of its space, on a core NATS subject, what it
// asks for and which ticket is its place (a Claim). A holder that
// releases while it knows of a claim it can serve writes its units over
// for the waiter, under a permit id of the waiter's plus a nonce of its
// own, and deletes the waiter's ticket with a note naming that id and the
// units: the commit. It sends both in one pipeline, so the stream applies
// the units first. The waiter, watching its space and its ticket, holds
// the permit once the commit and every unit it names have reached it,
// with no write of its own. The commit is a compare-and-set on the
// ticket's revision the claim names: it fails if the waiter left (gave
// up, took units itself) or renewed its ticket since, and then the holder
// frees the units it wrote.

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
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

// handedPrefix begins the note of a ticket a holder deleted handing its
// units over: "handed to <permit> units <unit> …".
const handedPrefix = "handed to "

// board is what the holders of a Semaphores know of the first waiters of
// their spaces: the last claim told on each. One subscription, to every
// space of the prefix, made while the handle holds a permit: a permit
// costs no subscription of its own, and a holder of one space drops the
// others' claims.
type board struct {
	mu      sync.Mutex
	sub     *nats.Subscription
	holders int
	claims  map[string]heard // by space
}

type heard struct {
	c  Claim
	at time.Time
}

// listen counts a permit held, subscribing with the first; a holder that
// cannot listen releases as it did before handoffs.
func (s *Semaphores) listen() {
	b := &s.claims
	b.mu.Lock()
	defer b.mu.Unlock()
	b.holders++
	if b.sub != nil {
		return
	}
	nc := s.bucket.Client().Conn()
	if nc == nil {
		return
	}
	prefix := limits.HandoffSubject(s.prefix, "")
	sub, err := nc.Subscribe(prefix+">", func(m *nats.Msg) {
		var c Claim
		space := m.Subject[len(prefix):]
		if c.UnmarshalJSON(m.Data) != nil || !validClaim(space, c) {
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		switch {
		case c.Weight > 0:
			b.claims[space] = heard{c: c, at: time.Now()}
		case b.claims[space].c.Permit == c.Permit:
			delete(b.claims, space) // withdrawn
		}
	})
	if err == nil {
		b.sub = sub
	}
}

// unlisten counts a permit ended, unsubscribing with the last.
func (s *Semaphores) unlisten() {
	b := &s.claims
	b.mu.Lock()
	defer b.mu.Unlock()
	b.holders--
	if b.holders > 0 || b.sub == nil {
		return
	}
	_ = b.sub.Unsubscribe()
	b.sub = nil
	clear(b.claims)
}

// validClaim reports whether c can be a claim of space: a withdrawal, or
// a ticket of the space's line and a TTL a unit can have.
func validClaim(space string, c Claim) bool {
	if c.Permit == "" || c.Weight < 0 || c.Weight > MaxUnits {
		return false
	}
	if c.Weight == 0 {
		return true
	}
	id, ok := strings.CutPrefix(c.Ticket, lineName(space)+".")
	return ok && id != "" && !strings.ContainsAny(id, ".*> ") && c.TicketRev > 0 && c.TTLMS >= 1000 && c.TTLMS%1000 == 0
}

// claim is the fresh claim the permit can serve, if any: one that asks
// for no more units than it holds.
func (p *Permit) claim() (Claim, bool) {
	b := &p.s.claims
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.claims[p.space]
	ok = ok && time.Since(h.at) < claimFresh && h.c.Weight <= p.weight
	return h.c, ok
}

// served drops claim c of space: one holder serves it, or finds it stale.
func (b *board) served(space string, c Claim) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.claims[space].c.Permit == c.Permit {
		delete(b.claims, space)
	}
}

// handOff releases the permit by handing its lowest units to the waiter
// of claim c, in one pipeline: the units written over for the waiter
// (permit c.Permit~nonce), the commit (the waiter's ticket deleted, its
// note naming that permit and the units), and the permit's other units
// freed. Only a refused commit is undone: the handoff did not happen, and
// the units written for the waiter are freed again, by compare-and-set on
// the revisions written. Once the commit landed, or may have, the units
// are the waiter's to hold or to free: a unit write reported refused may
// have landed (its answer lost, the unit renewed since by the waiter),
// and the waiter frees a handoff that can never be whole itself. It
// returns the error of the permit's own units, as Release.
func (p *Permit) handOff(ctx context.Context, units []heldUnit, c Claim) error {
	p.s.claims.served(p.space, c)
	hand, rest := units[:c.Weight], units[c.Weight:]
	id := c.Permit + handedSep + newPermitID()[:8]
	now := p.s.now().UTC()
	ws := make([]kv.Write, 0, len(units)+1)
	for _, u := range hand {
		rec := Unit{Sem: p.name, Unit: u.unit, Permit: id, Index: hand[0].unit, Weight: c.Weight,
			Host: c.Host, PID: c.PID, PIDStart: c.PIDStart, AcquiredAt: now, RenewedAt: now, Meta: c.Meta}
		data, err := rec.MarshalJSON()
		if err != nil {
			return err
		}
		ws = append(ws, kv.Write{Kind: kv.WriteUpdate, Key: unitKey(p.space, u.unit), Value: data,
			TTL: time.Duration(c.TTLMS) * time.Millisecond, Rev: u.rev})
	}
	// The units first, so that the waiter has them when the commit comes;
	// the other units after it, so that the next waiter, woken by it, may
	// take them.
	ws = append(ws, kv.Write{Kind: kv.WriteDelete, Key: c.Ticket, Rev: c.TicketRev, Value: handedNote(id, hand)})
	for _, u := range rest {
		ws = append(ws, kv.Write{Kind: kv.WriteDelete, Key: unitKey(p.space, u.unit), Rev: u.rev})
	}
	res := p.s.bucket.Pipeline(ctx, ws)
	written, commit, freed := res[:len(hand)], res[len(hand)], res[len(hand)+1:]
	// Refused, the commit did not happen; of unknown outcome, it may have.
	keep := !errors.Is(commit.Err, kv.ErrConflict)
	var errs []error
	for _, r := range written {
		if r.Err != nil {
			errs = append(errs, r.Err)
		}
	}
	for i, u := range rest {
		if freed[i].Err != nil {
			errs = append(errs, freed[i].Err)
			continue
		}
		p.s.setTomb(unitKey(p.space, u.unit), freed[i].Rev)
	}
	if !keep {
		// Free what was written for the waiter: it will not hold it.
		var undo []heldUnit
		for i, u := range hand {
			if written[i].Err == nil {
				undo = append(undo, heldUnit{unit: u.unit, rev: written[i].Rev})
			}
		}
		errs = append(errs, p.s.undoUnits(ctx, p.space, undo))
	}
	return errors.Join(errs...)
}

// handedSep joins a waiter's permit id and a holder's nonce into the id
// of the permit handed over.
const handedSep = "~"

// handedNote is the commit's note: the permit handed over and its units.
func handedNote(id string, hand []heldUnit) []byte {
	var b strings.Builder
	b.WriteString(handedPrefix + id + " units")
	for _, u := range hand {
		b.WriteString(" " + strconv.Itoa(u.unit))
	}
	return []byte(b.String())
}

// parseHanded reads a commit's note: the permit handed over and its
// units.
func parseHanded(note string) (string, []int, bool) {
	rest, ok := strings.CutPrefix(note, handedPrefix)
	if !ok {
		return "", nil, false
	}
	fields := strings.Fields(rest)
	if len(fields) < 3 || fields[1] != "units" {
		return "", nil, false
	}
	units := make([]int, 0, len(fields)-2)
	for _, f := range fields[2:] {
		u, err := strconv.Atoi(f)
		if err != nil || u < 0 {
			return "", nil, false
		}
		units = append(units, u)
	}
	return fields[0], units, true
}

// handed is the first waiter's side of the handoff: its claim, told again
// whenever its ticket's revision moves; the units holders have written
// for it so far; and, once a commit came, what it names.
type handed struct {
	s      *Semaphores
	c      Config
	cfg    acquireConfig
	place  *waitline.Place
	permit string
	told   uint64           // the ticket's revision last told; 0: never told
	toldAt time.Time        // when it was told
	units  map[int]heldUnit // units written for it, as the watch brought them
	others map[int]bool     // units live under a permit not the waiter's

	// committed is the permit a commit handed over (empty: none yet), and
	// named its units.
	committed string
	named     []int
	lost      bool // a unit the commit names went after it came
}

func (s *Semaphores) newHanded(c Config, cfg acquireConfig, place *waitline.Place) *handed {
	return &handed{s: s, c: c, cfg: cfg, place: place, permit: newPermitID(), units: map[int]heldUnit{}, others: map[int]bool{}}
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

// withdraw tells the holders that the claim is void (the waiter holds its
// units, or stopped waiting).
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

// saw notes unit i as the watch brought it: written for this waiter
// (under a permit of its own id and a holder's nonce), or not (any more).
func (h *handed) saw(i int, e kv.Entry) {
	delete(h.others, i)
	if e.Live() {
		if u, err := decodeUnit(h.c.Name, i, e); err == nil && strings.HasPrefix(u.Permit, h.permit+handedSep) {
			h.units[i] = heldUnit{unit: i, rev: e.Revision, rec: u}
			return
		}
		h.others[i] = true
	}
	if u, ok := h.units[i]; ok && u.rec.Permit == h.committed && slices.Contains(h.named, i) {
		h.lost = true // a unit committed is gone: its holder undid the handoff
	}
	delete(h.units, i)
}

// commit reads e, the ticket's tombstone: a holder's commit of a handoff
// to this waiter, then noted.
func (h *handed) commit(e kv.Entry) bool {
	if e.Op != kv.OpDelete {
		return false
	}
	id, units, ok := parseHanded(string(e.Value))
	if !ok || !strings.HasPrefix(id, h.permit+handedSep) || len(units) != h.cfg.weight {
		return false
	}
	h.committed, h.named = id, units
	return true
}

// settled says, once a commit came, whether every unit it names has come
// too (whole), or one of them is gone or another's (failed: its holder
// lost it, and the waiter can never hold the whole permit).
func (h *handed) settled() (whole, failed bool) {
	if h.lost {
		return false, true
	}
	whole = true
	for _, i := range h.named {
		switch u, ok := h.units[i]; {
		case h.others[i]:
			return false, true // its holder had lost it: its write was refused
		case !ok:
			whole = false
		case u.rec.Permit != h.committed:
			return false, true
		}
	}
	return whole, false
}

// settle is the end of a wait a commit came to, once it is decided: the
// permit, when every unit the commit names has come; errBackInLine, when
// one of them went to another (then the units written for the waiter are
// freed as the wait ends, and it waits again, at the back).
func (h *handed) settle() (*Permit, bool, error) {
	whole, failed := h.settled()
	switch {
	case whole:
		h.place.Drop()
		return h.accept(), true, nil
	case failed:
		return nil, true, errBackInLine
	}
	return nil, false, nil
}

// accept makes the permit of the units the commit names.
func (h *handed) accept() *Permit {
	h.withdraw()
	held := make([]heldUnit, 0, len(h.named))
	for _, i := range h.named {
		held = append(held, h.units[i])
	}
	slices.SortFunc(held, func(a, b heldUnit) int { return a.unit - b.unit })
	p := h.s.hold(h.c, h.committed, h.cfg, held, h.toldAt)
	// Units another holder wrote for it, whose commit was refused, are
	// that holder's to free; should its undo fail, they are freed here.
	var extra []heldUnit
	for _, u := range h.units {
		if u.rec.Permit != h.committed {
			extra = append(extra, u)
		}
	}
	if len(extra) > 0 {
		_ = h.s.undoUnits(context.Background(), h.s.space(h.c), extra)
	}
	return p
}

// noted is the units written for the waiter, as the watch brought them.
func (h *handed) noted() []heldUnit {
	out := make([]heldUnit, 0, len(h.units))
	for _, u := range h.units {
		out = append(out, u)
	}
	return out
}

// uncommitted frees the units written for the waiter that no commit
// followed within the client's timeout (a holder that died inside its
// pipeline, a commit of unknown outcome that did not land), so that they
// do not hold up the line until their TTL. A commit that comes later
// finds them gone, and fails.
func (h *handed) uncommitted(ctx context.Context) {
	_ = h.s.undoUnits(ctx, h.s.space(h.c), h.noted())
}

// abandon is the end of a wait that did not take its units: the claim is
// withdrawn, the place left, and any units written for it freed.
func (h *handed) abandon(ctx context.Context) {
	if h.told == 0 {
		return
	}
	h.withdraw()
	h.place.LeaveDetached(ctx)
	h.freeNoted(ctx)
}

// freeNoted frees the units written for the waiter: those noted from the
// watch, never held; and, if its leave was refused (a holder's commit
// deleted the ticket first, perhaps after the watch ended), those a read
// finds.
func (h *handed) freeNoted(ctx context.Context) {
	if h.place.LeaveErr() != nil {
		h.freeHanded(ctx)
		return
	}
	_ = h.s.undoUnits(ctx, h.s.space(h.c), h.noted())
}

// tookItself is the end of a wait that took its units itself (over units
// freed): the claim is withdrawn, and any units written for it freed.
func (h *handed) tookItself(ctx context.Context) {
	if h.told == 0 {
		return
	}
	h.withdraw()
	h.freeNoted(ctx)
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
		if u.live && u.rec != nil && strings.HasPrefix(u.rec.Permit, h.permit+handedSep) {
			mine = append(mine, heldUnit{unit: u.unit, rev: u.rev})
		}
	}
	_ = h.s.undoUnits(ctx, h.s.space(h.c), mine)
}
