package web

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/session"
)

// Leadership change reasons.
const (
	// ReasonElected: a leader where there was none since the dashboard
	// started (or its end was not seen).
	ReasonElected = "elected"
	// ReasonTransfer: the leader handed over (baton leader transfer, a
	// resign with a successor, a better-scored candidate).
	ReasonTransfer = "transfer"
	// ReasonExpiry: the leader stopped renewing and the server expired it
	// (a crash, a pause, a partition).
	ReasonExpiry = "expiry"
	// ReasonTakeover: a candidate on the leader's host found its process
	// dead and took the lease at once (a crash, noticed on the host).
	ReasonTakeover = "takeover"
	// ReasonResign: the leader released the lease (it exited or resigned
	// with nobody named).
	ReasonResign = "resign"
)

// maxChanges is how many leadership changes are kept per agent key.
const maxChanges = 20

// Change is one change of an agent key's leadership, by server time.
type Change struct {
	Time   time.Time `json:"time"`
	From   string    `json:"from,omitempty"`
	To     string    `json:"to,omitempty"`
	Host   string    `json:"host,omitempty"`
	Fence  uint64    `json:"fence,omitempty"`
	Reason string    `json:"reason"`
}

// agent is what the model knows of one agent key.
type agent struct {
	leader  *lease.Info
	cands   map[string]*lease.Info // by instance
	changes []Change               // oldest first, at most maxChanges
	// leaderless is the server time the key lost its leader (zero while
	// led, and for a key never seen led).
	leaderless time.Time
	ended      string            // why the last leader's term ended, until the next
	counts     map[string]uint64 // leadership changes by reason
	ttl        time.Duration     // the TTL of the last leader or candidacy seen
}

// saw keeps the TTL of a leader or candidacy of the key.
func (a *agent) saw(in *lease.Info) {
	if in.TTL > 0 {
		a.ttl = in.TTL
	} else if in.Record.TTL > 0 {
		a.ttl = time.Duration(in.Record.TTL)
	}
}

// undecodable is a live record that does not decode.
type undecodable struct {
	rev     uint64
	written time.Time
	ttl     time.Duration
	err     error
}

// Model is the cluster as the dashboard shows it: every session, lease,
// leader and candidate, kept current from two watches. Its methods are safe
// for concurrent use.
type Model struct {
	mu          sync.RWMutex
	sessions    map[string]*session.Session
	badSessions map[string]undecodable
	leases      map[string]*lease.Info // plain leases (not leader. or candidate.)
	badLeases   map[string]undecodable
	agents      map[string]*agent
	candKey     map[string]string // candidacy lease key -> agent key
	// offset is the server's clock less this host's, from the latest
	// server time read (setServerTime).
	offset         time.Duration
	syncedSessions bool
	syncedLeases   bool
	firstSync      chan struct{} // closed once both watches have read what was there
	now            func() time.Time

	// onChange is told of every change, with the kind and key it concerns.
	onChange func(kind, key string)
}

// Kinds of change the model reports (and the event stream carries).
const (
	KindSession  = "session"
	KindLease    = "lease"
	KindAgent    = "agent"
	KindQueue    = "queue"
	KindOverview = "overview"
	// KindSemaphore and KindLimiter are the limits (their key: the name).
	KindSemaphore = "semaphore"
	KindLimiter   = "limiter"
	// KindSpace is a path reservation space (its key: the space's name).
	KindSpace = "space"
)

func newModel(now func() time.Time, onChange func(kind, key string)) *Model {
	return &Model{
		sessions: map[string]*session.Session{}, badSessions: map[string]undecodable{},
		leases: map[string]*lease.Info{}, badLeases: map[string]undecodable{},
		agents: map[string]*agent{}, candKey: map[string]string{},
		now: now, onChange: onChange, firstSync: make(chan struct{}),
	}
}

// firstSynced is closed once the model has read every session and lease
// that was there when it started.
func (md *Model) firstSynced() <-chan struct{} { return md.firstSync }

// checkFirstSync closes firstSync when both watches are synced. The
// caller holds md.mu.
func (md *Model) checkFirstSync() {
	if md.syncedSessions && md.syncedLeases {
		select {
		case <-md.firstSync:
		default:
			close(md.firstSync)
		}
	}
}

// ServerNow is the server's clock as this process estimates it.
func (md *Model) ServerNow() time.Time {
	md.mu.RLock()
	defer md.mu.RUnlock()
	return md.now().Add(md.offset)
}

func (md *Model) serverNowLocked() time.Time { return md.now().Add(md.offset) }

// setServerTime records the server's clock read at local time local.
func (md *Model) setServerTime(server, local time.Time) {
	md.mu.Lock()
	md.offset = server.Sub(local)
	md.mu.Unlock()
}

// listing is every session and undecodable session record the model holds,
// sorted by slot, as session.Manager.List gives them (without ServerTime).
// The sessions are the model's own: read them, never change them.
func (md *Model) listing() *session.Listing {
	md.mu.RLock()
	defer md.mu.RUnlock()
	return md.listingLocked()
}

// listingLocked is listing for a caller that holds md.mu.
func (md *Model) listingLocked() *session.Listing {
	l := &session.Listing{Sessions: make([]*session.Session, 0, len(md.sessions))}
	for _, s := range md.sessions {
		l.Sessions = append(l.Sessions, s)
	}
	for slot, u := range md.badSessions {
		l.Undecodable = append(l.Undecodable, session.Undecodable{Slot: slot, Revision: u.rev, Written: u.written, TTL: u.ttl, Err: u.err})
	}
	slices.SortFunc(l.Sessions, func(a, b *session.Session) int { return strings.Compare(a.Slot, b.Slot) })
	slices.SortFunc(l.Undecodable, func(a, b session.Undecodable) int { return strings.Compare(a.Slot, b.Slot) })
	return l
}

// Synced reports whether both watches have delivered what was present.
func (md *Model) Synced() bool {
	md.mu.RLock()
	defer md.mu.RUnlock()
	return md.syncedSessions && md.syncedLeases
}

func (md *Model) notify(kind, key string) {
	if md.onChange != nil {
		md.onChange(kind, key)
	}
}

// applySession folds one session event into the model.
func (md *Model) applySession(ev session.Event) {
	md.mu.Lock()
	defer md.mu.Unlock()
	switch ev.Kind {
	case session.EventSynced:
		md.syncedSessions = true
		md.checkFirstSync()
		md.notify(KindOverview, "")
		return
	case session.EventPresent, session.EventJoin, session.EventCommit:
		if ev.Err != nil {
			delete(md.sessions, ev.Slot)
			md.badSessions[ev.Slot] = undecodable{rev: ev.Revision, written: ev.Time, ttl: ev.TTL, err: ev.Err}
		} else {
			delete(md.badSessions, ev.Slot)
			md.sessions[ev.Slot] = ev.Session
		}
	case session.EventClose, session.EventExpire:
		delete(md.sessions, ev.Slot)
		delete(md.badSessions, ev.Slot)
	default:
		return
	}
	md.notify(KindSession, ev.Slot)
	if ev.Kind != session.EventCommit {
		md.notify(KindOverview, "")
	}
}

// resetSessions forgets every session before a watch starts again.
func (md *Model) resetSessions() {
	md.mu.Lock()
	defer md.mu.Unlock()
	for slot := range md.sessions {
		md.notify(KindSession, slot)
	}
	for slot := range md.badSessions {
		md.notify(KindSession, slot)
	}
	clear(md.sessions)
	clear(md.badSessions)
	md.syncedSessions = false
	md.notify(KindOverview, "")
}

func (md *Model) agent(key string) *agent {
	a := md.agents[key]
	if a == nil {
		a = &agent{cands: map[string]*lease.Info{}, counts: map[string]uint64{}}
		md.agents[key] = a
	}
	return a
}

func (a *agent) record(c Change) {
	a.changes = append(a.changes, c)
	if len(a.changes) > maxChanges {
		a.changes = append(a.changes[:0], a.changes[len(a.changes)-maxChanges:]...)
	}
}

// applyLease folds one lease event into the model.
func (md *Model) applyLease(ev lease.Event) {
	md.mu.Lock()
	defer md.mu.Unlock()
	if ev.Kind == lease.EventSynced {
		md.syncedLeases = true
		md.checkFirstSync()
		md.notify(KindOverview, "")
		return
	}
	live := ev.Kind == lease.EventPresent || ev.Kind == lease.EventAcquire || ev.Kind == lease.EventRenew
	holder := ""
	if ev.Lease != nil {
		holder = ev.Lease.Holder
	}
	if ak, ok := md.candKey[ev.Key]; ok && !live {
		// A candidacy ends: the record is gone (its last version may be
		// unknown, so the key seen before says whose it was).
		delete(md.candKey, ev.Key)
		if a := md.agents[ak]; a != nil {
			for inst, c := range a.cands {
				if c.Key == ev.Key {
					delete(a.cands, inst)
				}
			}
			md.dropIfEmpty(ak)
		}
		md.notify(KindAgent, ak)
		return
	}
	ak, isLeader, isCand := lease.AgentKeyOf(ev.Key, holder)
	switch {
	case isLeader && live && ev.Err != nil:
		// A leader nobody can read: listed with the undecodable leases, as
		// status lists it, and shown held by "?" on its agent key.
		md.badLeases[ev.Key] = undecodable{rev: ev.Revision, written: ev.Time, err: ev.Err}
		md.agent(ak).leader = nil
		md.notify(KindAgent, ak)
		md.notify(KindLease, ev.Key)
		md.notify(KindOverview, "")
	case isLeader:
		if _, ok := md.badLeases[ev.Key]; ok {
			delete(md.badLeases, ev.Key)
			md.notify(KindLease, ev.Key)
		}
		md.applyLeader(ak, ev, live)
		md.notify(KindAgent, ak)
		if ev.Kind != lease.EventRenew {
			md.notify(KindOverview, "")
		}
	case isCand && live && ev.Err == nil:
		md.candKey[ev.Key] = ak
		a := md.agent(ak)
		a.cands[holder] = ev.Lease
		if a.leader == nil {
			a.saw(ev.Lease) // the leader's TTL, while there is one
		}
		md.notify(KindAgent, ak)
	default:
		if live && ev.Err != nil {
			delete(md.leases, ev.Key)
			md.badLeases[ev.Key] = undecodable{rev: ev.Revision, written: ev.Time, err: ev.Err}
		} else if live {
			delete(md.badLeases, ev.Key)
			md.leases[ev.Key] = ev.Lease
		} else {
			delete(md.leases, ev.Key)
			delete(md.badLeases, ev.Key)
		}
		md.notify(KindLease, ev.Key)
		if ev.Kind != lease.EventRenew {
			md.notify(KindOverview, "")
		}
	}
}

func (md *Model) applyLeader(ak string, ev lease.Event, live bool) {
	a := md.agent(ak)
	prev := a.leader
	switch {
	case live:
		a.leader = ev.Lease
		a.saw(ev.Lease)
		if ev.Kind != lease.EventAcquire {
			a.leaderless = time.Time{}
			return
		}
		in := ev.Lease
		c := Change{Time: ev.Time, To: in.Holder, Host: in.Host, Fence: in.Fence}
		switch {
		case in.PrevHolder != "":
			c.From, c.Reason = in.PrevHolder, ReasonTransfer
		case prev != nil && prev.Holder != in.Holder:
			c.From, c.Reason = prev.Holder, ReasonTakeover
		case a.ended != "":
			c.Reason = a.ended
			if n := len(a.changes); n > 0 {
				c.From = a.changes[n-1].From
			}
		default:
			c.Reason = ReasonElected
		}
		a.record(c)
		a.counts[c.Reason]++
		a.leaderless, a.ended = time.Time{}, ""
	default:
		a.leader = nil
		reason := ReasonResign
		if ev.Kind == lease.EventExpire {
			reason = ReasonExpiry
		}
		from := ""
		if prev != nil {
			from = prev.Holder
		}
		a.record(Change{Time: ev.Time, From: from, Reason: reason})
		a.leaderless, a.ended = ev.Time, reason
		md.dropIfEmpty(ak)
	}
}

// dropIfEmpty forgets an agent key with no leader and no candidates whose
// history says nothing (it was only ever seen in passing).
func (md *Model) dropIfEmpty(ak string) {
	a := md.agents[ak]
	if a != nil && a.leader == nil && len(a.cands) == 0 && len(a.changes) == 0 && len(a.counts) == 0 && !md.badLeader(ak) {
		delete(md.agents, ak)
	}
}

// badLeader reports whether agent key ak's leader record does not decode.
func (md *Model) badLeader(ak string) bool {
	_, ok := md.badLeases[lease.LeaderKey(ak)]
	return ok
}

// resetLeases forgets every lease, leader and candidacy before a watch
// starts again; leadership histories stay.
func (md *Model) resetLeases() {
	md.mu.Lock()
	defer md.mu.Unlock()
	for k := range md.leases {
		md.notify(KindLease, k)
	}
	for k := range md.badLeases {
		md.notify(KindLease, k)
	}
	for ak, a := range md.agents {
		a.leader = nil
		clear(a.cands)
		md.notify(KindAgent, ak)
	}
	clear(md.leases)
	clear(md.badLeases)
	clear(md.candKey)
	md.syncedLeases = false
	md.notify(KindOverview, "")
}

// agentKeys lists the agent keys known, sorted.
func (md *Model) agentKeys() []string {
	keys := make([]string, 0, len(md.agents))
	for k := range md.agents {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// runSessions keeps the sessions current until ctx is done, watching again
// (after a pause growing to 5 s) whenever a watch ends.
func (md *Model) runSessions(ctx context.Context, m *session.Manager, onErr func(error)) {
	watchLoop(ctx, onErr, func(ctx context.Context) error {
		ch, err := m.Watch(ctx)
		if err != nil {
			return err
		}
		md.resetSessions()
		for ev := range ch {
			md.applySession(ev)
		}
		return nil
	})
}

// runLeases keeps the leases current until ctx is done.
func (md *Model) runLeases(ctx context.Context, ls *lease.Leases, onErr func(error)) {
	watchLoop(ctx, onErr, func(ctx context.Context) error {
		ch, err := ls.Watch(ctx)
		if err != nil {
			return err
		}
		md.resetLeases()
		for ev := range ch {
			md.applyLease(ev)
		}
		return nil
	})
}

// watchLoop runs watch until ctx is done, again after each end, pausing
// between attempts (100 ms doubling to 5 s; back to 100 ms after a watch
// that lasted a minute).
func watchLoop(ctx context.Context, onErr func(error), watch func(context.Context) error) {
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		began := time.Now()
		if err := watch(ctx); err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
		if time.Since(began) > time.Minute {
			pause = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}
