package queue

import (
	"container/heap"
	"slices"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// index is one worker's view of a queue, built from its watches of the
// queues bucket (tasks, tokens, config: one stream, in order) and of the
// sessions bucket (the key locks). Every worker builds the same view from
// the same records, so the order in which they pick tasks is one global
// order; a compare-and-set decides between workers that pick the same.
//
// Picking costs O(log keys): the keys that can run now sit in one heap per
// priority, ordered by when the key was last served; a key whose locks are
// all held is in no heap, so it is skipped without being looked at. It is
// not safe for concurrent use: the worker's loop owns it.
type index struct {
	q   string
	cfg Config
	// offset is the server's clock minus this host's, for backoff times;
	// early is how far offset may be ahead of it (half the round trip that
	// measured it), added to times a task must not start before.
	offset time.Duration
	early  time.Duration

	tasks map[string]*itask
	keys  map[string]*ikey
	// keyCfg are the keys' own settings (KeyConfig), kept while their
	// records live, whether or not the key has tasks.
	keyCfg map[string]KeyConfig
	// keyRates counts the keys in keyCfg with a rate of their own;
	// rateHeld are the keys whose rate admits no start now (keyrate.go):
	// in no heap, like a paused key.
	keyRates int
	rateHeld map[string]bool
	// touching are the tasks that touch paths and run or are being
	// claimed; blocked the keys held back because their next task's paths
	// clash with one of them (touches.go).
	touching map[string]*itask
	blocked  map[string]bool
	// keyLanes counts the keys in keyCfg with more than one lane.
	keyLanes int
	// Tasks that wait for others (after.go): the pending ones not free to
	// run yet, by id; their ids by each task they wait for; how the tasks
	// seen to end ended (for the queue's retention); and the waiting
	// tasks to cancel, with why, since one they wait for failed.
	waiting  map[string]*itask
	children map[string][]string
	finals   expiring[State]
	doomed   map[string]string
	ready    [3]keyHeap
	due      dueHeap

	// active are the active tasks by the slot they ran under (two at once
	// when an orphan is not settled yet and the next task of the key runs);
	// nActive counts them.
	active  map[string][]*itask
	nActive int
	// ahead are tasks this worker settled (final) before the watch said
	// so, with that revision: older entries of them are not applied.
	ahead map[string]uint64

	// Sessions: the live ones by slot, and the highest revision delivered;
	// qSeq is the highest revision of the queue's watch.
	slots   map[string]*session.Session
	sessSeq uint64
	qSeq    uint64
	synced  bool // both watches have delivered their initial values

	// The revisions at which slots of the queue's keys and tokens were last
	// removed (deleted, expired): a claim creates over them in one round
	// trip, where a create over a tombstone it does not know costs three.
	// slotGone expires with the tombstones (index_prune.go).
	slotGone  expiring[uint64]
	tokenGone map[int]uint64

	// rested are the last services of keys the view forgot, for the
	// queue's retention (index_prune.go).
	rested expiring[uint64]

	// Tokens: the live ones by index, those this worker is claiming, and
	// the free ones below max_active.
	tokens   map[int]*token
	reserved map[int]bool
	free     intSet
	inflight int

	// suspects are active tasks whose lock may be gone: the worker checks
	// them (orphans) after each event.
	suspects map[string]*itask
	// endings are attempts whose holder ended them, by task id, as their
	// lock's tombstone says (endingOf), while the queue's watch has not yet
	// delivered that end.
	endings map[string]ending
	// sameHost are locks and tokens of this queue held by other processes
	// of this host, by slot or token key.
	sameHost map[string]holder
	// This worker's host and process: holders elsewhere on this host are
	// checked for liveness.
	myHost  string
	myPID   int
	myStart string

	bodyBytes int // bytes of task records kept for claiming without a read
	// undecodable task records (never run).
	undecodable map[string]uint64
}

// bodyBudget bounds the task records a worker keeps in memory to claim a
// task without reading it first; past it, the claim reads the record.
const bodyBudget = 64 << 20

// holder is a process of this host that holds a lock or token, as
// recorded.
type holder struct {
	PID, ChildPID        int
	PIDStart, ChildStart string
	Slot                 string
	Token                int // -1: a lock
	Rev                  uint64
}

type itask struct {
	id, key  string
	prio     int
	seq      uint64
	state    State
	rev      uint64
	attempts int
	run      *Run
	cancel   bool
	// endFence and endReason are the last ended attempt's fence and why.
	endFence  uint64
	endReason string
	body      []byte // the record at rev, when kept
	due       time.Time
	queued    bool // in its key's FIFO (gen says which entry)
	gen       int
	claiming  bool
	after     []string // the tasks it waits for (after.go)
	paths     *paths   // the paths it edits (touches.go), nil if none
}

type ikey struct {
	name   string
	n      int // tasks of the key in the view
	fifo   [3]taskHeap
	served uint64 // revision of the last claim seen
	// recent are the revisions of its last weight claims, oldest first
	// (order); weight and lanes are its KeyConfig's (0: the queue's).
	recent []uint64
	weight int
	lanes  int
	paused bool // its KeyConfig pauses it: in no heap
	held   bool // its rate admits no start now: in no heap
	// blocked: its next task's paths clash with a running task's
	// (touches.go): in no heap until one ends.
	blocked bool
	// local counts this worker's claims in flight: the key sorts last
	// meanwhile, as it will once the claim lands.
	local    int
	claiming map[int]bool // lanes
	pos      [3]int       // place in ready[p], -1 if not there
	head     [3]uint64    // seq of the FIFO head, for the heap order
}

func newIndex(q string, cfg Config) *index {
	x := &index{
		q: q, cfg: cfg,
		tasks: map[string]*itask{}, keys: map[string]*ikey{}, keyCfg: map[string]KeyConfig{}, rateHeld: map[string]bool{},
		touching: map[string]*itask{}, blocked: map[string]bool{},
		waiting: map[string]*itask{}, children: map[string][]string{}, finals: newExpiring[State](), doomed: map[string]string{}, active: map[string][]*itask{}, ahead: map[string]uint64{},
		slots: map[string]*session.Session{}, tokens: map[int]*token{}, reserved: map[int]bool{},
		suspects: map[string]*itask{}, sameHost: map[string]holder{}, undecodable: map[string]uint64{},
		slotGone: newExpiring[uint64](), tokenGone: map[int]uint64{}, rested: newExpiring[uint64](),
		endings: map[string]ending{},
	}
	for p := range x.ready {
		x.ready[p].level = p
	}
	x.resetFree()
	return x
}

// setConfig applies a changed config: capacity, lanes and slot names.
// applyKeyConfig takes a version of a key's settings. One that does not
// decode is left for doctor; the last good one stays.
func (x *index) applyKeyConfig(e kv.Entry) {
	name := keyOfKeyConfig(x.q, e.Key)
	x.countKeyConfig(name, -1)
	if !e.Live() {
		delete(x.keyCfg, name)
	} else if kc, err := decodeKeyConfig(x.q, e); err == nil {
		x.keyCfg[name] = kc
	}
	// (one that does not decode: the last good one stays)
	x.countKeyConfig(name, 1)
	if k := x.keys[name]; k != nil {
		kc := x.keyCfg[name]
		k.paused, k.weight, k.lanes = kc.Paused, kc.Weight, kc.PerKey
		x.refresh(k)
	}
}

func (x *index) setConfig(cfg Config) {
	if cfg.Revision != 0 && cfg.Revision < x.cfg.Revision {
		return
	}
	x.cfg = cfg
	x.resetFree()
	for _, k := range x.keys {
		x.refresh(k)
	}
}

func (x *index) resetFree() {
	x.free = intSet{}
	for i := range x.cfg.MaxActive {
		if x.tokens[i] == nil && !x.reserved[i] {
			x.free.add(i)
		}
	}
}

// --- watch input -----------------------------------------------------------

// applyQueue takes one entry of the queue's watch (its tasks, tokens and
// config), now being this host's time of its arrival.
func (x *index) applyQueue(e kv.Entry, now time.Time) {
	x.qSeq = max(x.qSeq, e.Revision)
	switch {
	case isTaskKey(x.q, e.Key):
		x.applyTask(e, now)
	case isConfigKey(x.q, e.Key):
		// A config that does not decode is left for doctor; the last good
		// one stays.
		if e.Live() {
			if c, err := decodeConfig(e); err == nil {
				x.setConfig(c)
			}
		}
	case isKeyConfigKey(x.q, e.Key):
		x.applyKeyConfig(e)
	default:
		if i := tokenIndexOf(x.q, e.Key); i >= 0 {
			x.applyToken(i, e)
		}
	}
}

func (x *index) applyTask(e kv.Entry, now time.Time) {
	id := taskIDOf(x.q, e.Key)
	if en, ok := x.endings[id]; ok && (e.Revision >= en.rev || !e.Live()) {
		delete(x.endings, id)
	}
	if t := x.tasks[id]; t != nil && e.Revision < t.rev {
		return // older than what a claim already told
	}
	if rev, ok := x.ahead[id]; ok {
		if e.Revision < rev {
			return // older than what this worker wrote at its end
		}
		delete(x.ahead, id)
	}
	if !e.Live() {
		delete(x.undecodable, id)
		x.drop(x.tasks[id], now)
		return
	}
	d, err := indexTask(x.q, e)
	if err != nil {
		x.undecodable[id] = e.Revision
		x.drop(x.tasks[id], now)
		return
	}
	delete(x.undecodable, id)
	x.applyRecord(&d, e.Value, now)
}

// taskVersion is what the view takes of a version of a task: read from
// its watch (indexTask), or from a task this worker wrote (versionOf). It
// is a value, not a Task: a worker reads every version of every task of
// its queue, and a Task on the heap for each was most of what it
// allocated.
type taskVersion struct {
	id, key  string
	priority Priority
	state    State
	attempts int
	seq      uint64
	run      *Run   // the attempt in progress (active)
	claimed  uint64 // the revision that started the current or last attempt (claimedRev)
	// ended is the fence of the last attempt that ended, and why.
	endFence   uint64
	endReason  string
	cancel     bool
	retryAfter Duration
	// runAt and delay: when a pending task may start (Task.NotBefore).
	runAt   time.Time
	delay   Duration
	after   []string // the tasks it waits for
	touches []string // the paths it edits, in space (touches.go)
	space   string
	rev     uint64
	written time.Time
}

// versionOf is t as the view takes it.
func versionOf(t *Task) taskVersion {
	v := taskVersion{id: t.ID, key: t.Key, priority: t.Priority, state: t.State, attempts: t.Attempts, seq: t.Seq,
		run: t.Run, claimed: t.claimedRev(), cancel: t.CancelRequested, retryAfter: t.RetryAfter, runAt: t.RunAt, delay: t.Delay, after: t.After, touches: t.Touches, space: t.Space, rev: t.Revision, written: t.Written}
	if t.Result != nil {
		v.endFence, v.endReason = t.Result.Fence, t.Result.Reason
	}
	return v
}

// applyRecord takes a version of a task at d.rev (written at d.written,
// server time); value is its record as stored, kept to claim it later.
func (x *index) applyRecord(d *taskVersion, value []byte, now time.Time) {
	t := x.tasks[d.id]
	if t != nil && d.rev < t.rev {
		return
	}
	k := x.key(d.key)
	if c := d.claimed; c > 0 && k.noteClaim(c) {
		x.refresh(k)
	}
	if d.state.Final() {
		if d.rev > x.qSeq {
			x.ahead[d.id] = d.rev
		}
		if d.state != StateDone {
			// Only failures are kept: a parent the view does not know
			// once complete counts as done (after.go), and a queue ends
			// far more tasks done than not.
			x.finals.set(d.id, d.state, now)
		}
		delete(x.waiting, d.id)
		defer x.parentEnded(d.id, now)
		x.drop(t, now)
		x.tidy(k, now)
		return
	}
	if t == nil {
		t = &itask{id: d.id, key: d.key, prio: d.priority.rank(), seq: d.seq}
		x.tasks[d.id] = t
		k.n++
	}
	if t.state == StateActive && (d.state != StateActive || t.run.Slot != d.run.Slot || t.run.Fence != d.run.Fence) {
		x.unsetActive(t)
	}
	x.setBody(t, nil)
	t.paths = pathsOf(d.space, d.touches, t.paths)
	t.rev, t.state, t.attempts, t.cancel, t.seq = d.rev, d.state, d.attempts, d.cancel, d.seq
	t.endFence, t.endReason = d.endFence, d.endReason
	switch d.state {
	case StateActive:
		x.dequeue(t)
		if t.run == nil {
			x.active[d.run.Slot] = append(x.active[d.run.Slot], t)
			x.nActive++
		}
		t.run = d.run
		x.suspects[t.id] = t
		x.touch(t, true)
	case StatePending:
		x.setBody(t, value)
		t.after = d.after
		t.due = time.Time{}
		if !d.runAt.IsZero() {
			t.due = d.runAt.Add(-x.offset + x.early)
		}
		if d.delay > 0 {
			t.due = later(t.due, x.localDue(d.written, d.delay, now))
		}
		if x.holdBack(t) {
			break
		}
		x.wait(t, now)
	case StateFailed:
		x.setBody(t, value)
		t.due = x.localDue(d.written, d.retryAfter, now)
		x.wait(t, now)
	}
}

// localDue is when, on this host's clock, the server's clock is surely
// past after the server time written: now plus after for a record this
// worker wrote just now (written zero).
func (x *index) localDue(written time.Time, after Duration, now time.Time) time.Time {
	if written.IsZero() {
		return now.Add(time.Duration(after))
	}
	return written.Add(time.Duration(after)).Add(-x.offset + x.early)
}

// wait enqueues t if it is due by now, else keeps it in the due heap until
// it is.
func (x *index) wait(t *itask, now time.Time) {
	if !t.due.After(now) {
		x.enqueue(t)
		return
	}
	x.dequeue(t)
	t.gen++ // a due item of an earlier version is stale now
	heap.Push(&x.due, dueItem{at: t.due, task: t, gen: t.gen})
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// garbage marks the task at rev as a record that does not decode: it is
// never picked again until a newer revision comes.
func (x *index) garbage(id string, rev uint64, now time.Time) {
	if t := x.tasks[id]; t != nil && t.rev == rev {
		x.undecodable[id] = rev
		x.drop(t, now)
	}
}

// drop forgets a task that is final, deleted or undecodable, and its key
// if nothing of it is left.
func (x *index) drop(t *itask, now time.Time) {
	if t == nil {
		return
	}
	defer x.parentEnded(t.id, now) // a task deleted or garbled: what waits for it is looked at again
	x.dequeue(t)
	if t.state == StateActive {
		x.unsetActive(t)
	}
	x.setBody(t, nil)
	x.touch(t, false)
	delete(x.suspects, t.id)
	delete(x.tasks, t.id)
	t.state = StateDone
	if k := x.keys[t.key]; k != nil {
		k.n--
		x.refresh(k)
		x.tidy(k, now)
	}
}

func (x *index) unsetActive(t *itask) {
	if t.run != nil {
		on := x.active[t.run.Slot]
		if i := slices.Index(on, t); i >= 0 {
			on = slices.Delete(on, i, i+1)
			x.nActive--
			if len(on) == 0 {
				delete(x.active, t.run.Slot)
			} else {
				x.active[t.run.Slot] = on
			}
		}
	}
	delete(x.suspects, t.id)
	t.run = nil
	if !t.claiming {
		x.touch(t, false)
	}
}

func (x *index) setBody(t *itask, b []byte) {
	x.bodyBytes -= len(t.body)
	t.body = nil
	if b != nil && x.bodyBytes+len(b) <= bodyBudget {
		t.body = b
		x.bodyBytes += len(b)
	}
}

// markSynced says both watches have delivered their initial values;
// head is the sessions bucket's last revision read before its watch
// started.
func (x *index) markSynced(head uint64) {
	x.synced = true
	x.sessSeq = max(x.sessSeq, head)
	x.recheckWaiting(time.Now())
	for id, en := range x.endings {
		if en.rev <= x.qSeq {
			delete(x.endings, id) // delivered, or the task's key is gone
		}
	}
	for _, t := range x.tasks {
		if t.state == StateActive {
			x.suspects[t.id] = t
		}
	}
}

// --- the FIFOs and the ready heaps --------------------------------------

func (x *index) key(name string) *ikey {
	k := x.keys[name]
	if k == nil {
		k = &ikey{name: name, pos: [3]int{-1, -1, -1}}
		if served, ok := x.rested.get(name); ok {
			k.noteClaim(served)
			x.rested.delete(name)
		}
		kc := x.keyCfg[name]
		k.paused, k.weight, k.lanes = kc.Paused, kc.Weight, kc.PerKey
		k.held = x.rateHeld[name]
		x.keys[name] = k
	}
	return k
}

func (x *index) enqueue(t *itask) {
	if t.queued || t.claiming {
		return
	}
	t.queued = true
	t.gen++
	k := x.key(t.key)
	k.fifo[t.prio].push(fifoItem{t: t, gen: t.gen})
	x.refresh(k)
}

func (x *index) dequeue(t *itask) {
	if !t.queued {
		return
	}
	t.queued = false
	t.gen++
	if k := x.keys[t.key]; k != nil {
		x.refresh(k)
	}
}

// peek is the head of a key's FIFO at level p, dropping stale entries.
func (k *ikey) peek(p int) *itask {
	f := &k.fifo[p]
	for f.Len() > 0 {
		it := (*f)[0]
		if it.t.queued && it.t.gen == it.gen {
			return it.t
		}
		f.popTop()
	}
	return nil
}

// freeLane is a lane of k whose slot has no live session and that this
// worker is not claiming, or -1.
func (x *index) freeLane(k *ikey) int {
	for l := range x.lanesOf(k) {
		if slot := x.cfg.Slot(k.name, l); !k.claiming[l] && x.slots[slot] == nil && !x.runsUnder(slot) {
			return l
		}
	}
	return -1
}

// keyRateOf is the rate that bounds key name's starts (nil: none).
func (x *index) keyRateOf(name string) *RateLimit {
	return x.keyCfg[name].RateOf(x.cfg)
}

// keyRated reports whether any key's starts are bounded by a rate.
func (x *index) keyRated() bool { return x.cfg.KeyRate != nil || x.keyRates > 0 }

// holdKey takes key name out of the heaps while its rate admits no start
// (on), or lets it back in.
func (x *index) holdKey(name string, on bool) {
	if on {
		x.rateHeld[name] = true
	} else {
		delete(x.rateHeld, name)
	}
	if k := x.keys[name]; k != nil && k.held != on {
		k.held = on
		x.refresh(k)
	}
}

// lanesOf is how many tasks of k run at once: its own per_key, else the
// queue's.
func (x *index) lanesOf(k *ikey) int {
	if k.lanes > 0 {
		return k.lanes
	}
	return x.cfg.PerKey
}

// countKeyConfig adds d to the counts of keys with a rate and with lanes
// of their own, for key name's settings.
func (x *index) countKeyConfig(name string, d int) {
	kc := x.keyCfg[name]
	if kc.Rate != nil {
		x.keyRates += d
	}
	if kc.PerKey > 1 {
		x.keyLanes += d
	}
}

// multiLane reports whether any key has more than one lane.
func (x *index) multiLane() bool { return x.cfg.PerKey > 1 || x.keyLanes > 0 }

// noteClaim records a claim of the key at revision c (once), keeping its
// last weight claims; it reports whether its place in the round robin
// may have moved.
func (k *ikey) noteClaim(c uint64) bool {
	w := max(k.weight, 1)
	i, found := slices.BinarySearch(k.recent, c)
	if found || len(k.recent) >= w && i == 0 {
		return false // known, or older than the claims that count
	}
	k.recent = slices.Insert(k.recent, i, c)
	if len(k.recent) > w {
		k.recent = k.recent[len(k.recent)-w:]
	}
	k.served = k.recent[len(k.recent)-1]
	return true
}

// runsUnder reports whether an active task runs under slot whose lock is
// not provably gone: a claim whose lock the sessions watch has not
// delivered yet holds its lane all the same.
func (x *index) runsUnder(slot string) bool {
	for _, t := range x.active[slot] {
		if t.run != nil && x.sessSeq < t.run.Fence {
			return true
		}
	}
	return false
}

// refresh puts k in the ready heap of each level where it has a task
// waiting and a lane free, and takes it out of the others.
func (x *index) refresh(k *ikey) {
	runnable := !k.paused && !k.held && !k.blocked && x.freeLane(k) >= 0
	for p := range k.fifo {
		head := k.peek(p)
		in := k.pos[p] >= 0
		switch {
		case head != nil && runnable:
			k.head[p] = head.seq
			if in {
				heap.Fix(&x.ready[p], k.pos[p])
			} else {
				heap.Push(&x.ready[p], k)
			}
		case in:
			heap.Remove(&x.ready[p], k.pos[p])
		}
	}
}

// orphan is an active task whose key lock is provably gone: its worker
// died or lost the lock, so it goes back to pending.
type orphan struct {
	id    string
	rev   uint64
	body  []byte
	fence uint64
	slot  string
}

// orphans returns the suspects whose lock is gone. A lock is gone when the
// sessions watch has delivered a revision at or past the lock's fence and
// the slot holds no live session with that fence, nor a live record that
// does not decode: revisions only grow, so the fence's own creation was
// delivered (or superseded) by then. They stay suspects until settled (see
// settling).
func (x *index) orphans(now time.Time) []orphan {
	if !x.synced || len(x.suspects) == 0 {
		return nil
	}
	var out []orphan
	for id, t := range x.suspects {
		if t.state != StateActive || t.run == nil {
			delete(x.suspects, id)
			continue
		}
		s := x.slots[t.run.Slot]
		if s != nil && (s.Fence == t.run.Fence || unreadable(s)) {
			// Held, or held by nobody-knows-who (adr/0005): its holder may be
			// alive, its work still stopping, so neither the task nor its
			// token is given back. A change of the slot checks again.
			delete(x.suspects, id)
			continue
		}
		if x.sessSeq < t.run.Fence {
			continue // the lock's creation is not delivered yet
		}
		if en, ok := x.endings[id]; ok && en.fence == t.run.Fence && en.rev > x.qSeq && now.Before(en.until) {
			continue // its holder ended it: the queue's watch brings that end
		}
		out = append(out, orphan{id: id, rev: t.rev, body: t.body, fence: t.run.Fence, slot: t.run.Slot})
	}
	return out
}

// settling says a worker is putting the orphan id back: it is no suspect
// until that ends (suspect again if it fails).
func (x *index) settling(id string) { delete(x.suspects, id) }

// suspect makes the active task id a suspect again.
func (x *index) suspect(id string) {
	if t := x.tasks[id]; t != nil && t.state == StateActive {
		x.suspects[id] = t
	}
}
