package queue

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// Snapshot is one queue at one moment of the server: what waits, what runs
// under which lock, what ended.
type Snapshot struct {
	Config Config `json:"config"`
	// ServerTime is the server's clock right after the queue was read.
	ServerTime time.Time `json:"server_time"`
	// Counts has every state, zero or not.
	Counts  map[State]int `json:"counts"`
	Pending PendingView   `json:"pending"`
	Active  ActiveView    `json:"active"`
	// Locks are the key locks of the queue's keys: those its tasks hold,
	// and those held by others (baton run, baton join) on keys with tasks
	// waiting, by key and lane.
	Locks []Lock `json:"locks"`
	// Tasks is every task read, sorted by id (only with WithTasks).
	Tasks []*Task `json:"-"`
	// Undecodable are task records that do not decode: never run.
	Undecodable []string `json:"undecodable"`
	// Keys are the keys with settings of their own (KeyConfig), by key.
	Keys []KeyConfig `json:"-"`
	// Schedules are the queue's schedules that decode, by name.
	Schedules []*Schedule `json:"-"`
	// Records counts what the queue keeps in the server.
	Records RecordCounts `json:"records"`
}

// PausedKeys are the keys whose starts are paused (PauseKey), sorted.
func (s *Snapshot) PausedKeys() []string {
	out := []string{}
	for _, k := range s.Keys {
		if k.Paused {
			out = append(out, k.Key)
		}
	}
	sort.Strings(out)
	return out
}

// RecordCounts is what a queue keeps in the server: its own live records,
// and everything the queues bucket holds.
type RecordCounts struct {
	// Queue is the queue's live records: its config, tasks (finished ones
	// until the retention), capacity tokens, workers' presence and inboxes.
	Queue int `json:"queue"`
	// Bucket is the messages of the queues bucket: every queue's live
	// records, and the tombstones and expiry markers of removed ones until
	// their TTL (5 minutes).
	Bucket uint64 `json:"bucket"`
}

// PendingView is what waits to run (pending, and failed waiting for their
// retry).
type PendingView struct {
	Total      int                 `json:"total"`
	ByPriority map[Priority]int    `json:"by_priority"`
	ByKey      map[string]KeyCount `json:"by_key"`
	// Oldest is when the oldest waiting task was added (its adder's clock),
	// or its run-at time if later, and OldestAge how long ago that was by
	// the server's; tasks whose time is ahead do not count.
	Oldest    time.Time     `json:"oldest_added_at,omitzero"`
	OldestAge time.Duration `json:"-"`
	OldestID  string        `json:"oldest_id,omitempty"`
	// Delayed counts the pending tasks (of Total) whose run-at time is
	// still ahead by the server's clock; NextAt is the soonest of those
	// times.
	Delayed int       `json:"delayed"`
	NextAt  time.Time `json:"next_at,omitzero"`
}

// KeyCount is what waits for one key, by priority.
type KeyCount struct {
	High   int `json:"high"`
	Normal int `json:"normal"`
	Low    int `json:"low"`
}

// Total is the sum over priorities.
func (k KeyCount) Total() int { return k.High + k.Normal + k.Low }

// ActiveView is what runs.
type ActiveView struct {
	// Used is how many tasks run (or hold capacity tokens); Max is
	// max_active (0: no limit); Available is Max-Used (-1: no limit).
	Used      int                       `json:"used"`
	Max       int                       `json:"max"`
	Available int                       `json:"available"`
	ByKey     map[string]int            `json:"by_key"`
	ByLabel   map[string]map[string]int `json:"by_label"`
}

// SnapshotOption configures Snapshot.
type SnapshotOption func(*snapshotConfig)

type snapshotConfig struct{ tasks bool }

// WithTasks keeps every task in Snapshot.Tasks.
func WithTasks() SnapshotOption { return func(c *snapshotConfig) { c.tasks = true } }

// Snapshot reads queue q with one watch of its records and one of the
// sessions, and sums it up.
func (qs *Queues) Snapshot(ctx context.Context, q string, opts ...SnapshotOption) (*Snapshot, error) {
	var sc snapshotConfig
	for _, o := range opts {
		o(&sc)
	}
	// The config, the queue's records and the sessions (its key locks) are
	// read at once: three reads of which none needs another's answer.
	var (
		cfg         Config
		cfgErr      error
		sessions    *session.Listing
		sessionsErr error
		bucket      kv.StreamStatus
		bucketErr   error
		wg          sync.WaitGroup
	)
	wg.Go(func() { cfg, cfgErr = qs.Config(ctx, q) })
	wg.Go(func() { sessions, sessionsErr = qs.m.List(ctx) })
	wg.Go(func() { bucket, bucketErr = qs.bucket.Status(ctx) })
	// Tasks decode while the rest arrive (what the status shows of them,
	// unless it lists them); other records of the queue are counted by
	// their keys.
	entries, err := kv.EntriesDecoded(ctx, qs.bucket, queuePattern(q), func(e kv.Entry) (statusLine, error) {
		if isKeyConfigKey(q, e.Key) {
			kc, err := decodeKeyConfig(q, e)
			return statusLine{keyCfg: &kc}, err
		}
		if isScheduleKey(q, e.Key) {
			s, err := decodeSchedule(q, e)
			return statusLine{sched: s}, err
		}
		if !isTaskKey(q, e.Key) {
			return statusLine{}, nil
		}
		return lineOf(q, e, sc.tasks)
	})
	wg.Wait()
	// A queue that does not exist says so first.
	for _, err := range []error{cfgErr, err, sessionsErr, bucketErr} {
		if err != nil {
			return nil, err
		}
	}
	snap := summarize(qs, cfg, entries, sessions, sc)
	snap.Records = RecordCounts{Queue: len(entries), Bucket: bucket.Messages}
	return snap, nil
}

// summarize sums up a queue's records (in the stream's order, tasks
// decoded) and the sessions.
func summarize(qs *Queues, cfg Config, entries []kv.Decoded[statusLine], l *session.Listing, sc snapshotConfig) *Snapshot {
	q := cfg.Queue
	snap := &Snapshot{
		Config: cfg, ServerTime: l.ServerTime, Counts: map[State]int{},
		Pending: PendingView{ByPriority: map[Priority]int{}, ByKey: map[string]KeyCount{}},
		Active:  ActiveView{Max: cfg.MaxActive, ByKey: map[string]int{}, ByLabel: map[string]map[string]int{}},
		Locks:   []Lock{}, Undecodable: []string{},
	}
	for _, s := range States {
		snap.Counts[s] = 0
	}
	for _, p := range Priorities {
		snap.Pending.ByPriority[p] = 0
	}
	tokens := 0
	slots := map[string]*session.Session{}
	for _, s := range l.Sessions {
		slots[s.Slot] = s
	}
	lockSeen := map[string]bool{}
	addLock := func(key string, lane int, s *session.Session, run *Run) {
		if lockSeen[s.Slot] {
			return
		}
		lockSeen[s.Slot] = true
		lk := qs.lockOf(q, key, lane, s, l.ServerTime)
		if run != nil && run.Fence == s.Fence && !run.StartedAt.IsZero() {
			// The worker's estimate of the server's time when it took it.
			lk.Acquired = run.StartedAt
		}
		snap.Locks = append(snap.Locks, lk)
	}
	waiting := map[string]*KeyCount{} // Pending.ByKey, counted in place
	for _, d := range entries {
		if !isTaskKey(q, d.Entry.Key) {
			if tokenIndexOf(q, d.Entry.Key) >= 0 {
				tokens++
			}
			if kc := d.Out.keyCfg; kc != nil && d.Err == nil {
				snap.Keys = append(snap.Keys, *kc)
			}
			if s := d.Out.sched; s != nil && d.Err == nil {
				snap.Schedules = append(snap.Schedules, s)
			}
			continue
		}
		if d.Err != nil {
			snap.Undecodable = append(snap.Undecodable, taskIDOf(q, d.Entry.Key))
			continue
		}
		t := d.Out
		if sc.tasks {
			snap.Tasks = append(snap.Tasks, t.task)
		}
		snap.Counts[t.state]++
		switch t.state {
		case StatePending, StateFailed:
			snap.Pending.Total++
			snap.Pending.ByPriority[t.priority]++
			if nb := t.notBefore; t.state == StatePending && nb.After(l.ServerTime) {
				snap.Pending.Delayed++
				if snap.Pending.NextAt.IsZero() || nb.Before(snap.Pending.NextAt) {
					snap.Pending.NextAt = nb
				}
			}
			kc := waiting[t.key]
			if kc == nil {
				kc = &KeyCount{}
				waiting[t.key] = kc
			}
			switch t.priority {
			case High:
				kc.High++
			case Low:
				kc.Low++
			default:
				kc.Normal++
			}
			// A delayed task waits from its time on: one whose time is
			// ahead is not waiting yet.
			since := t.addedAt
			if nb := t.notBefore; t.state == StatePending && nb.After(since) {
				since = nb
			}
			if !since.After(l.ServerTime) && (snap.Pending.OldestID == "" || since.Before(snap.Pending.Oldest)) {
				snap.Pending.Oldest, snap.Pending.OldestID = since, t.id
			}
		case StateActive:
			snap.Active.ByKey[t.key]++
			for k, v := range t.task.Labels {
				if snap.Active.ByLabel[k] == nil {
					snap.Active.ByLabel[k] = map[string]int{}
				}
				snap.Active.ByLabel[k][v]++
			}
			if s := slots[t.task.Run.Slot]; s != nil {
				addLock(t.key, t.task.Run.Lane, s, t.task.Run)
			}
		}
	}
	for key, kc := range waiting {
		snap.Pending.ByKey[key] = *kc
	}
	if snap.Pending.OldestID != "" {
		snap.Pending.OldestAge = max(l.ServerTime.Sub(snap.Pending.Oldest), 0)
	}
	// Locks held by the queue's workers whose task record says otherwise
	// (a claim under way, a crash between writes), and locks held by others
	// on keys with tasks waiting.
	lanes := lanesFrom(cfg, snap.Keys)
	for _, s := range l.Sessions {
		if s.Meta["queue"] == q {
			key, lane := keyOfSlot(cfg, s.Slot, lanes)
			addLock(key, lane, s, nil)
		}
	}
	for key := range waiting {
		for lane := range lanes(key) {
			if s := slots[cfg.Slot(key, lane)]; s != nil {
				addLock(key, lane, s, nil)
			}
		}
	}
	sort.Slice(snap.Locks, func(i, j int) bool {
		a, b := snap.Locks[i], snap.Locks[j]
		return a.Key < b.Key || a.Key == b.Key && a.Lane < b.Lane
	})
	sort.Strings(snap.Undecodable)
	sort.Slice(snap.Schedules, func(i, j int) bool { return snap.Schedules[i].Name < snap.Schedules[j].Name })
	if sc.tasks {
		sort.Slice(snap.Tasks, func(i, j int) bool { return snap.Tasks[i].ID < snap.Tasks[j].ID })
	}
	snap.Active.Used = max(tokens, snap.Counts[StateActive])
	snap.Active.Available = -1
	if cfg.MaxActive > 0 {
		snap.Active.Available = max(cfg.MaxActive-snap.Active.Used, 0)
	}
	return snap
}

// lanesFrom is the number of lanes of each key: its own per_key among
// keys, else the queue's.
func lanesFrom(cfg Config, keys []KeyConfig) func(key string) int {
	own := map[string]int{}
	for _, k := range keys {
		if k.PerKey > 0 {
			own[k.Key] = k.PerKey
		}
	}
	return func(key string) int {
		if n, ok := own[key]; ok {
			return n
		}
		return cfg.PerKey
	}
}

// keyOfSlot is the key and lane of one of the queue's slots, lanes
// saying how many each key has.
func keyOfSlot(cfg Config, slot string, lanes func(string) int) (string, int) {
	rest := strings.TrimPrefix(slot, cfg.SlotPrefix)
	{
		if i := strings.LastIndexByte(rest, '.'); i > 0 && i+1 < len(rest) && rest[i+1] != '0' {
			lane := 0
			for _, c := range rest[i+1:] {
				if c < '0' || c > '9' {
					return rest, 0
				}
				lane = lane*10 + int(c-'0')
			}
			if lane < lanes(rest[:i]) {
				return rest[:i], lane
			}
		}
	}
	return rest, 0
}

// Summary is a queue in one line of `baton status`.
type Summary struct {
	Queue     string `json:"queue"`
	Pending   int    `json:"pending"`
	Active    int    `json:"active"`
	MaxActive int    `json:"max_active"`
	Done      int    `json:"done"`
	Failed    int    `json:"failed"`
	Dead      int    `json:"dead"`
	Cancelled int    `json:"cancelled"`
}

// Summaries reads every queue's counts with one watch of the queues bucket
// (no sessions). A missing queues bucket has none.
func (qs *Queues) Summaries(ctx context.Context) ([]Summary, error) {
	// Tasks (what the counts need of them) and configs decode while the
	// rest arrive.
	type record struct {
		task statusLine
		cfg  *Config
	}
	entries, err := kv.EntriesDecoded(ctx, qs.bucket, "", func(e kv.Entry) (record, error) {
		q, rest, ok := strings.Cut(e.Key, ".")
		switch {
		case !ok:
			return record{}, nil
		case rest == "config":
			c, err := decodeConfig(e)
			return record{cfg: &c}, err
		case strings.HasPrefix(rest, "task."):
			t, err := lineOf(q, e, false)
			return record{task: t}, err
		}
		return record{}, nil
	})
	if errors.Is(err, kv.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byQueue := map[string]*Summary{}
	tokens := map[string]int{}
	get := func(q string) *Summary {
		if byQueue[q] == nil {
			byQueue[q] = &Summary{Queue: q}
		}
		return byQueue[q]
	}
	for _, d := range entries {
		q, rest, ok := strings.Cut(d.Entry.Key, ".")
		if !ok {
			continue
		}
		switch {
		case rest == "config":
			if d.Err == nil {
				get(q).MaxActive = d.Out.cfg.MaxActive
			}
		case strings.HasPrefix(rest, "cap."):
			tokens[q]++
		case strings.HasPrefix(rest, "task."):
			if d.Err != nil {
				continue
			}
			s := get(q)
			switch t := d.Out.task; t.state {
			case StatePending, StateFailed:
				s.Pending++
				if t.state == StateFailed {
					s.Failed++
				}
			case StateActive:
				s.Active++
			case StateDone:
				s.Done++
			case StateDead:
				s.Dead++
			case StateCancelled:
				s.Cancelled++
			}
		}
	}
	out := make([]Summary, 0, len(byQueue))
	for q, s := range byQueue {
		s.Active = max(s.Active, tokens[q])
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, nil
}
