package sem

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

// writes counts the writes a client makes to the units of a space (keys
// <prefix><unit>), not to its line, in all and by operation.
type writes struct {
	prefix string
	mu     sync.Mutex
	n      int
	ops    map[kv.TraceOp]int
}

func (w *writes) Call(c kv.TraceCall) {
	unit, ok := strings.CutPrefix(c.Key, w.prefix)
	if _, err := strconv.Atoi(unit); c.Op.Write() && ok && err == nil {
		w.mu.Lock()
		w.n++
		if w.ops == nil {
			w.ops = map[kv.TraceOp]int{}
		}
		w.ops[c.Op]++
		w.mu.Unlock()
	}
}

func (w *writes) of(op kv.TraceOp) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ops[op]
}

func (w *writes) Return(kv.TraceReturn) {}

func (w *writes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// handoffEnv is a server, a holder's Semaphores and a waiter's, each on a
// connection of its own; the waiter's writes to units are counted.
type handoffEnv struct {
	holder, waiter             *Semaphores
	holderWrites, waiterWrites *writes
}

func newHandoffEnv(t *testing.T, name string, max int) handoffEnv {
	t.Helper()
	srv := kvtest.StartServer(t)
	ww := &writes{prefix: "sem." + name + "."}
	hw := &writes{prefix: "sem." + name + "."}
	hs, err := New(kvtest.Connect(t, srv.ClientURL(), kv.WithTracer(hw)), WithHostID("h1"))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := New(kvtest.Connect(t, srv.ClientURL(), kv.WithTracer(ww)), WithHostID("h2"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := hs.Ensure(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := hs.Create(ctx, name, max); err != nil {
		t.Fatal(err)
	}
	return handoffEnv{holder: hs, waiter: ws, holderWrites: hw, waiterWrites: ww}
}

// until polls cond, local state, every millisecond for up to 5 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 5s", what)
		}
	}
}

type acquired struct {
	p   *Permit
	err error
}

func (e handoffEnv) wait(ctx context.Context, name string, opts ...AcquireOption) chan acquired {
	got := make(chan acquired, 1)
	go func() {
		p, err := e.waiter.Acquire(ctx, name, opts...)
		got <- acquired{p, err}
	}()
	return got
}

// A holder that releases while the first waiter's claim is known hands it
// the unit: the waiter holds it with no write of its own, at the revision
// the holder wrote (its fence), and has left the line.
func TestRelease_HandsTheUnitToTheFirstWaiter(t *testing.T) {
	e := newHandoffEnv(t, "one", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := e.holder.TryAcquire(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	got := e.wait(ctx, "one", WithTTL(7*time.Second), WithMeta(map[string]string{"job": "j2"}))
	until(t, "the holder hears the waiter's claim", func() bool { _, ok := held.claim(); return ok })
	before := e.waiterWrites.count()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.p.Release(ctx)
	if n := e.waiterWrites.count() - before; n != 0 {
		t.Fatalf("the waiter wrote %d units after the release; want none: they were handed to it", n)
	}
	st, err := e.holder.Status(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Waiters) != 0 || len(st.Holders) != 1 {
		t.Fatalf("after the handoff: %d holders, %d waiters; want the waiter holding, out of line", len(st.Holders), len(st.Waiters))
	}
	h := st.Holders[0]
	if h.Permit != a.p.ID() || h.Host != "h2" || h.Revision != a.p.Fence() || h.Meta["job"] != "j2" || a.p.Index() != 0 {
		t.Fatalf("the unit as read %+v; want it named for the waiter's permit %s (h2, meta job=j2) at its fence %d", h, a.p.ID(), a.p.Fence())
	}
	if held.Fence() >= a.p.Fence() {
		t.Fatalf("the waiter's fence %d is not above the holder's %d", a.p.Fence(), held.Fence())
	}
	// The waiter's permit is a permit like any: it renews and releases.
	if err := a.p.Renew(ctx); err != nil {
		t.Fatalf("renewing the handed permit: %v", err)
	}
}

// A holder of three units hands two to a waiter asking for two and frees
// the third, which the next waiter, woken by the first one's leaving,
// takes.
func TestRelease_HandsAsManyUnitsAsAskedAndFreesTheRest(t *testing.T) {
	e := newHandoffEnv(t, "pool", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := e.holder.TryAcquire(ctx, "pool", WithWeight(3))
	if err != nil {
		t.Fatal(err)
	}
	two := e.wait(ctx, "pool", WithWeight(2))
	until(t, "the holder hears the waiter's claim", func() bool { _, ok := held.claim(); return ok })
	one := make(chan acquired, 1)
	go func() {
		p, err := e.holder.Acquire(ctx, "pool")
		one <- acquired{p, err}
	}()
	until(t, "the second waiter is in line", func() bool {
		st, err := e.holder.Status(ctx, "pool")
		return err == nil && len(st.Waiters) == 2
	})
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := <-two, <-one
	if a.err != nil || b.err != nil {
		t.Fatalf("waiters: %v, %v", a.err, b.err)
	}
	defer a.p.Release(ctx)
	defer b.p.Release(ctx)
	if u := a.p.Units(); len(u) != 2 || u[0] != 0 || u[1] != 1 || a.p.Index() != 0 {
		t.Fatalf("the waiter for two holds units %v; want the holder's lowest two, 0 and 1", u)
	}
	if u := b.p.Units(); len(u) != 1 || u[0] != 2 {
		t.Fatalf("the waiter behind holds units %v; want the one freed, 2", u)
	}
}

// A claim whose ticket moved on (renewed since it was told) or is gone
// (the waiter left) makes the handoff's commit fail: the holder frees the
// unit it wrote for the waiter, and nothing is left held.
func TestRelease_AStaleClaimFreesTheUnits(t *testing.T) {
	e := newHandoffEnv(t, "one", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, stale := range []struct {
		name  string
		claim func(Claim) Claim
	}{
		{"renewed", func(c Claim) Claim { c.TicketRev--; return c }},
		{"left", func(c Claim) Claim { c.Ticket += "x"; c.TicketRev = 1; return c }},
	} {
		t.Run(stale.name, func(t *testing.T) {
			held, err := e.holder.TryAcquire(ctx, "one")
			if err != nil {
				t.Fatal(err)
			}
			wctx, stop := context.WithCancel(ctx)
			got := e.wait(wctx, "one")
			until(t, "the holder hears the waiter's claim", func() bool { _, ok := held.claim(); return ok })
			c, _ := held.claim()
			bad := stale.claim(c)
			b := &e.holder.claims
			b.mu.Lock()
			b.claims["one"] = heard{c: bad, at: time.Now()}
			b.mu.Unlock()
			updates, deletes := e.holderWrites.of(kv.TraceUpdate), e.holderWrites.of(kv.TraceDelete)
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// The holder wrote the unit for the waiter, and deleted it
			// again once the commit was refused.
			if u, d := e.holderWrites.of(kv.TraceUpdate)-updates, e.holderWrites.of(kv.TraceDelete)-deletes; u != 1 || d != 1 {
				t.Fatalf("the holder's release made %d updates and %d deletes of units; want the handoff's write and its undo", u, d)
			}
			// The unit written for the waiter was freed again; the waiter,
			// woken by that, takes the unit itself.
			a := <-got
			stop()
			if a.err != nil {
				t.Fatal(a.err)
			}
			if err := a.p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := e.holder.Status(ctx, "one")
			if err != nil || st.Held != 0 || len(st.Waiters) != 0 {
				t.Fatalf("after both released: %+v, %v; want nothing held, nobody waiting", st, err)
			}
		})
	}
}

// A waiter whose leave loses to a holder's commit (it stopped waiting, or
// took units freed meanwhile itself) frees the units written for it.
func TestHandOff_ALeaveThatLostFreesTheUnitsHanded(t *testing.T) {
	for _, end := range []struct {
		name string
		end  func(context.Context, *handed)
	}{
		{"gave up", func(ctx context.Context, h *handed) { h.abandon(ctx) }},
		{"took others", func(ctx context.Context, h *handed) { h.place.Leave(ctx); h.tookItself(ctx) }},
	} {
		t.Run(end.name, func(t *testing.T) {
			e := newHandoffEnv(t, "one", 1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			held, err := e.holder.TryAcquire(ctx, "one")
			if err != nil {
				t.Fatal(err)
			}
			c, err := e.waiter.Config(ctx, "one")
			if err != nil {
				t.Fatal(err)
			}
			place, err := e.waiter.line(c).Join(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := e.waiter.options(nil)
			h := e.waiter.newHanded(c, cfg, place)
			// Told again until heard: a claim told before the holder's
			// subscription reached the server is lost (the waiter's
			// renewals tell it again).
			until(t, "the holder hears the claim", func() bool {
				h.told = 0
				h.tell(place.Revision())
				_, ok := held.claim()
				return ok
			})
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := e.holder.Status(ctx, "one")
			if err != nil || len(st.Holders) != 1 || !strings.HasPrefix(st.Holders[0].Permit, h.permit+handedSep) || len(st.Waiters) != 0 {
				t.Fatalf("after the handoff: %+v, %v; want the unit named for the waiter, its ticket gone", st, err)
			}
			end.end(ctx, h)
			if !errors.Is(place.LeaveErr(), kv.ErrConflict) {
				t.Fatalf("the waiter's leave: %v; want it refused, the ticket gone", place.LeaveErr())
			}
			st, err = e.holder.Status(ctx, "one")
			if err != nil || st.Held != 0 {
				t.Fatalf("after the waiter's end: %+v, %v; want nothing held", st, err)
			}
		})
	}
}

// The waiter tells its claim again at each renewal of its ticket, so a
// holder that releases seconds later still hands the unit over.
func TestRelease_HandsOverAfterTheTicketWasRenewed(t *testing.T) {
	e := newHandoffEnv(t, "one", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := e.holder.TryAcquire(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	got := e.wait(ctx, "one")
	until(t, "the holder hears the waiter's claim", func() bool { _, ok := held.claim(); return ok })
	first, _ := held.claim()
	renewed := func() bool {
		c, ok := held.claim()
		return ok && c.TicketRev > first.TicketRev
	}
	until(t, "the holder hears the claim at the renewed ticket's revision", renewed)
	before := e.waiterWrites.count()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.p.Release(ctx)
	if n := e.waiterWrites.count() - before; n != 0 {
		t.Fatalf("the waiter wrote %d units after the release; want none: they were handed to it", n)
	}
}

// A waiter holds only the units the commit names, under the permit it
// names: units another holder wrote for it (a handoff whose commit was
// refused, its undo not yet arrived) are not taken; a commit whose units
// have not all come is waited on; one whose unit goes fails.
func TestSettle_TakesOnlyTheUnitsTheCommitNames(t *testing.T) {
	e := newHandoffEnv(t, "pool", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := e.waiter.Config(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	place, err := e.waiter.line(c).Join(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := e.waiter.options(nil)
	h := e.waiter.newHanded(c, cfg, place)
	// Two holders wrote a unit each for the waiter, each under its nonce.
	ids := []string{h.permit + handedSep + "aaaaaaaa", h.permit + handedSep + "bbbbbbbb"}
	var entries [2]kv.Entry
	for i := range entries {
		u := Unit{Sem: "pool", Unit: i, Permit: ids[i], Index: i, Weight: 1, Host: "h2", PID: 1}
		data, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		key := unitKey("pool", i)
		rev, err := e.waiter.bucket.Create(ctx, key, data, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		entries[i] = kv.Entry{Key: key, Value: data, Revision: rev}
	}
	h.saw(0, entries[0])
	tomb := func(note []byte) kv.Entry { return kv.Entry{Key: place.Key(), Op: kv.OpDelete, Value: note} }
	if h.commit(tomb([]byte(handedPrefix + "another" + handedSep + "x units 1"))) {
		t.Fatal("a commit to another permit was taken for this waiter's")
	}
	// The second holder commits; its unit has not come yet.
	if !h.commit(tomb(handedNote(ids[1], []heldUnit{{unit: 1}}))) {
		t.Fatal("the commit was not read as this waiter's")
	}
	if _, done, _ := h.settle(); done {
		t.Fatal("settled before the unit the commit names came")
	}
	h.saw(1, entries[1])
	p, done, err := h.settle()
	if !done || err != nil {
		t.Fatalf("settle once the unit came = %v, %v", done, err)
	}
	defer p.Release(ctx)
	if u := p.Units(); len(u) != 1 || u[0] != 1 || p.Fence() != entries[1].Revision || p.ID() != ids[1] {
		t.Fatalf("the permit %s holds units %v at fence %d; want %s, unit 1 at %d", p.ID(), u, p.Fence(), ids[1], entries[1].Revision)
	}

	// A commit whose unit its holder then takes back fails.
	h2 := e.waiter.newHanded(c, cfg, place)
	id := h2.permit + handedSep + "cccccccc"
	h2.units[2] = heldUnit{unit: 2, rev: 99, rec: Unit{Permit: id}}
	if !h2.commit(tomb(handedNote(id, []heldUnit{{unit: 2}}))) {
		t.Fatal("the commit was not read as this waiter's")
	}
	h2.saw(2, kv.Entry{Key: unitKey("pool", 2), Op: kv.OpDelete, Revision: 100})
	if _, done, err := h2.settle(); !done || !errors.Is(err, errBackInLine) {
		t.Fatalf("settle after a committed unit went = %v, %v; want errBackInLine", done, err)
	}

	// A commit naming a unit live under another's permit (its holder had
	// lost it, so its write was refused) fails at once.
	h3 := e.waiter.newHanded(c, cfg, place)
	other := Unit{Sem: "pool", Unit: 2, Permit: "someone-else", Index: 2, Weight: 1, Host: "h9", PID: 1}
	data, err := other.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	h3.saw(2, kv.Entry{Key: unitKey("pool", 2), Value: data, Revision: 101})
	if !h3.commit(tomb(handedNote(h3.permit+handedSep+"dddddddd", []heldUnit{{unit: 2}}))) {
		t.Fatal("the commit was not read as this waiter's")
	}
	if _, done, err := h3.settle(); !done || !errors.Is(err, errBackInLine) {
		t.Fatalf("settle of a commit naming another's unit = %v, %v; want errBackInLine at once", done, err)
	}
}

// A handle listens for claims while it holds a permit, and not after.
func TestListen_WhileAPermitIsHeld(t *testing.T) {
	e := newHandoffEnv(t, "pool", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subscribed := func() bool {
		e.holder.claims.mu.Lock()
		defer e.holder.claims.mu.Unlock()
		return e.holder.claims.sub != nil
	}
	a, err := e.holder.TryAcquire(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.holder.TryAcquire(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !subscribed() {
		t.Fatal("no subscription while a permit is held")
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if subscribed() {
		t.Fatal("still subscribed once no permit is held")
	}
}

// Units written for a waiter that no commit follows (their holder died
// inside its pipeline) are freed by the waiter a client timeout later,
// and the waiter then takes them itself: the line is not held up until
// their TTL.
func TestFirst_FreesUnitsNoCommitFollows(t *testing.T) {
	srv := kvtest.StartServer(t)
	hs, err := New(kvtest.Connect(t, srv.ClientURL()), WithHostID("h1"))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := New(kvtest.Connect(t, srv.ClientURL(), kv.WithTimeout(time.Second)), WithHostID("h2"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hs.Ensure(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := hs.Create(ctx, "one", 1); err != nil {
		t.Fatal(err)
	}
	held, err := hs.TryAcquire(ctx, "one", WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx) // lost: it only stops its keepalive
	got := make(chan acquired, 1)
	go func() {
		p, err := ws.Acquire(ctx, "one", WithTTL(time.Minute))
		got <- acquired{p, err}
	}()
	until(t, "the holder hears the waiter's claim", func() bool { _, ok := held.claim(); return ok })
	c, _ := held.claim()
	// The holder writes its unit for the waiter, and dies before its
	// commit.
	u := held.held()[0]
	rec := Unit{Sem: "one", Unit: 0, Permit: c.Permit + handedSep + "deadbeef", Index: 0, Weight: 1, Host: c.Host, PID: c.PID}
	data, err := rec.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hs.bucket.Update(ctx, unitKey("one", 0), data, time.Minute, u.rev); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.p.Release(ctx)
	if strings.Contains(a.p.ID(), handedSep) || time.Since(start) > 10*time.Second {
		t.Fatalf("the waiter got permit %s after %s; want one it took itself, within seconds, not the TTL of 1m", a.p.ID(), time.Since(start))
	}
}
