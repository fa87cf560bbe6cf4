package web

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/view"
)

// SessionQuery selects a page of sessions.
type SessionQuery struct {
	// Text keeps sessions whose slot, task, agent, host, instance or a
	// meta value contains it (case-insensitive).
	Text  string
	Host  string
	State string // live, stale, expiring; "" for any
	// Sort is slot (default), task, agent, host, pid, fence, age or left;
	// Desc reverses it.
	Sort   string
	Desc   bool
	Offset int
	Limit  int // default 100, at most 1000
}

// SessionPage is one page of sessions, in the rows of `status --json`.
type SessionPage struct {
	Total      int              `json:"total"`
	Offset     int              `json:"offset"`
	Limit      int              `json:"limit"`
	Rows       []map[string]any `json:"rows"`
	Hosts      []string         `json:"hosts"`
	ServerTime time.Time        `json:"server_time"`
}

// sessionSorts are the orders a page of sessions can take.
var sessionSorts = map[string]func(a, b *session.Session) int{
	"slot":  func(a, b *session.Session) int { return cmp.Compare(a.Slot, b.Slot) },
	"task":  func(a, b *session.Session) int { return cmp.Compare(a.TaskID, b.TaskID) },
	"agent": func(a, b *session.Session) int { return cmp.Compare(a.AgentID, b.AgentID) },
	"host":  func(a, b *session.Session) int { return cmp.Compare(a.Host, b.Host) },
	"pid":   func(a, b *session.Session) int { return cmp.Compare(a.PID, b.PID) },
	"fence": func(a, b *session.Session) int { return cmp.Compare(a.Fence, b.Fence) },
	// Age: the oldest renewal first.
	"age": func(a, b *session.Session) int { return a.Written.Compare(b.Written) },
	// Left: the soonest expiry first.
	"left": func(a, b *session.Session) int { return a.Written.Add(a.TTL).Compare(b.Written.Add(b.TTL)) },
}

func matches(s *session.Session, text string) bool {
	if text == "" {
		return true
	}
	for _, f := range []string{s.Slot, s.TaskID, s.AgentID, s.Host, s.Instance, s.Message} {
		if strings.Contains(strings.ToLower(f), text) {
			return true
		}
	}
	for k, v := range s.Meta {
		if strings.Contains(strings.ToLower(k+"="+v), text) {
			return true
		}
	}
	return false
}

// Sessions returns one page of the sessions that q selects. Undecodable
// sessions are listed after the others, whatever the order.
func (md *Model) Sessions(q SessionQuery, staleAfter time.Duration) (*SessionPage, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	q.Limit = min(q.Limit, 1000)
	q.Offset = max(q.Offset, 0)
	text := strings.ToLower(q.Text)
	order := sessionSorts[q.Sort]
	if order == nil {
		order = sessionSorts["slot"]
	}
	md.mu.RLock()
	now := md.serverNowLocked()
	hostSet := map[string]bool{}
	picked := make([]*session.Session, 0, len(md.sessions))
	for _, s := range md.sessions {
		hostSet[s.Host] = true
		if q.Host != "" && s.Host != q.Host || !matches(s, text) {
			continue
		}
		if q.State != "" && string(s.Timing(now, staleAfter).State) != q.State {
			continue
		}
		picked = append(picked, s)
	}
	var bad []string
	if q.Host == "" {
		for slot, u := range md.badSessions {
			if (text == "" || strings.Contains(strings.ToLower(slot), text)) &&
				(q.State == "" || string(session.TimingAt(u.written, u.ttl, now, staleAfter).State) == q.State) {
				bad = append(bad, slot)
			}
		}
	}
	slices.Sort(bad)
	slices.SortFunc(picked, func(a, b *session.Session) int {
		c := order(a, b)
		if c == 0 {
			c = cmp.Compare(a.Slot, b.Slot)
		} else if q.Desc {
			c = -c
		}
		return c
	})
	page := &SessionPage{Total: len(picked) + len(bad), Offset: q.Offset, Limit: q.Limit, Rows: []map[string]any{}, ServerTime: now}
	for i := q.Offset; i < page.Total && len(page.Rows) < q.Limit; i++ {
		if i < len(picked) {
			row, err := view.SessionRow(picked[i], now, staleAfter)
			if err != nil {
				md.mu.RUnlock()
				return nil, err
			}
			page.Rows = append(page.Rows, row)
			continue
		}
		slot := bad[i-len(picked)]
		u := md.badSessions[slot]
		page.Rows = append(page.Rows, view.UndecodableRow(slot, "slot", u.rev, u.written, u.ttl, u.err, now, staleAfter))
	}
	md.mu.RUnlock()
	for h := range hostSet {
		page.Hosts = append(page.Hosts, h)
	}
	slices.Sort(page.Hosts)
	if page.Hosts == nil {
		page.Hosts = []string{}
	}
	return page, nil
}

// sessionRow is one slot's row now, or nil when it has no session.
func (md *Model) sessionRow(slot string, staleAfter time.Duration) (map[string]any, error) {
	md.mu.RLock()
	defer md.mu.RUnlock()
	now := md.serverNowLocked()
	if s := md.sessions[slot]; s != nil {
		return view.SessionRow(s, now, staleAfter)
	}
	if u, ok := md.badSessions[slot]; ok {
		return view.UndecodableRow(slot, "slot", u.rev, u.written, u.ttl, u.err, now, staleAfter), nil
	}
	return nil, nil
}

// leaseRowLocked is one plain lease's row, or nil.
func (md *Model) leaseRowLocked(key string, now time.Time, staleAfter time.Duration) (map[string]any, error) {
	if in := md.leases[key]; in != nil {
		return view.LeaseRow(in, now, staleAfter)
	}
	if u, ok := md.badLeases[key]; ok {
		return view.UndecodableRow(key, "key", u.rev, u.written, u.ttl, u.err, now, staleAfter), nil
	}
	return nil, nil
}

func (md *Model) leaseRow(key string, staleAfter time.Duration) (map[string]any, error) {
	md.mu.RLock()
	defer md.mu.RUnlock()
	return md.leaseRowLocked(key, md.serverNowLocked(), staleAfter)
}

// Leases lists the plain leases (not leaders or candidacies), by key.
func (md *Model) Leases(staleAfter time.Duration) ([]map[string]any, time.Time, error) {
	md.mu.RLock()
	defer md.mu.RUnlock()
	now := md.serverNowLocked()
	keys := make([]string, 0, len(md.leases)+len(md.badLeases))
	for k := range md.leases {
		keys = append(keys, k)
	}
	for k := range md.badLeases {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rows := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		row, err := md.leaseRowLocked(k, now, staleAfter)
		if err != nil {
			return nil, now, err
		}
		rows = append(rows, row)
	}
	return rows, now, nil
}

// AgentView is one agent key: its leader, its candidates and the last
// changes of its leadership.
type AgentView struct {
	Key string `json:"key"`
	// Leader is `baton leader KEY --json`'s leader (nil: none).
	Leader map[string]any `json:"leader"`
	// Candidates are `baton leader KEY --json`'s, each with last_seen
	// (server time of its last renewal), last_seen_ms (how long ago), and
	// quiet: not seen for three renewal intervals (the page hides those
	// unless asked).
	Candidates []map[string]any `json:"candidates"`
	Changes    []Change         `json:"changes"`
	// LeaderlessMS is how long the key has had no leader (0 while led).
	LeaderlessMS int64 `json:"leaderless_ms"`
}

func (md *Model) agentViewLocked(key string, now time.Time) (*AgentView, error) {
	a := md.agents[key]
	if a == nil {
		return nil, nil
	}
	v := &AgentView{Key: key, Candidates: []map[string]any{}, Changes: append([]Change{}, a.changes...)}
	if a.leader != nil {
		row, err := view.LeaderJSON(a.leader, now)
		if err != nil {
			return nil, err
		}
		v.Leader = row
	} else if u, ok := md.badLeases[lease.LeaderKey(key)]; ok {
		v.Leader = view.UndecodableRow(lease.LeaderKey(key), "key", u.rev, u.written, u.ttl, u.err, now, 0)
		v.Leader["holder"] = "?"
	} else if !a.leaderless.IsZero() {
		v.LeaderlessMS = max(now.Sub(a.leaderless).Milliseconds(), 0)
	}
	cands := make([]*lease.Info, 0, len(a.cands))
	for _, c := range a.cands {
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(x, y *lease.Info) int {
		if c := cmp.Compare(y.Score, x.Score); c != 0 {
			return c
		}
		if c := x.AcquiredAt.Compare(y.AcquiredAt); c != 0 {
			return c
		}
		return cmp.Compare(x.Holder, y.Holder)
	})
	for _, c := range cands {
		row := view.CandidateJSON(lease.Candidate{
			Instance: c.Holder, Host: c.Host, PID: c.PID, Since: c.AcquiredAt, Score: c.Score,
			Capabilities: c.Capabilities, Eligible: c.Eligible(), Written: c.Written, TTL: c.TTL,
		})
		seen := now.Sub(c.Written)
		row["last_seen"] = c.Written
		row["last_seen_ms"] = max(seen.Milliseconds(), 0)
		// Renewals come every third of the TTL (internal/keepalive).
		row["quiet"] = c.TTL > 0 && seen >= c.TTL
		row["leader"] = a.leader != nil && a.leader.Holder == c.Holder
		v.Candidates = append(v.Candidates, row)
	}
	return v, nil
}

// Agent is one agent key's view, or nil when the model knows nothing of it.
func (md *Model) Agent(key string) (*AgentView, error) {
	md.mu.RLock()
	defer md.mu.RUnlock()
	return md.agentViewLocked(key, md.serverNowLocked())
}

// Agents lists every agent key known, sorted.
func (md *Model) Agents() ([]*AgentView, time.Time, error) {
	md.mu.RLock()
	defer md.mu.RUnlock()
	now := md.serverNowLocked()
	out := []*AgentView{}
	for _, k := range md.agentKeys() {
		v, err := md.agentViewLocked(k, now)
		if err != nil {
			return nil, now, err
		}
		out = append(out, v)
	}
	return out, now, nil
}

// Counts is how many of each thing the model holds.
type Counts struct {
	Sessions    map[string]int `json:"sessions"` // by state
	Leaders     int            `json:"leaders"`
	AgentKeys   int            `json:"agent_keys"`
	Leaderless  int            `json:"leaderless"`
	Candidates  int            `json:"candidates"`
	Leases      map[string]int `json:"leases"` // by state
	Undecodable int            `json:"undecodable"`
}

// Counts counts sessions and leases by state (at the server's time now),
// leaders, agent keys without a leader and candidates.
func (md *Model) Counts(staleAfter time.Duration) Counts {
	md.mu.RLock()
	defer md.mu.RUnlock()
	now := md.serverNowLocked()
	c := Counts{
		Sessions: map[string]int{string(session.StateLive): 0, string(session.StateStale): 0, string(session.StateExpiring): 0},
		Leases:   map[string]int{string(session.StateLive): 0, string(session.StateStale): 0, string(session.StateExpiring): 0},
	}
	for _, s := range md.sessions {
		c.Sessions[string(s.Timing(now, staleAfter).State)]++
	}
	for _, in := range md.leases {
		c.Leases[string(session.TimingAt(in.Written, in.TTL, now, staleAfter).State)]++
	}
	c.Undecodable = len(md.badSessions) + len(md.badLeases)
	for ak, a := range md.agents {
		c.AgentKeys++
		c.Candidates += len(a.cands)
		if a.leader != nil || md.badLeader(ak) {
			c.Leaders++
		} else {
			c.Leaderless++
		}
	}
	return c
}

// Status is `baton status --json` of what the model holds, with queues.
func (md *Model) Status(queues []queue.Summary, staleAfter time.Duration) (map[string]any, error) {
	md.mu.RLock()
	defer md.mu.RUnlock()
	now := md.serverNowLocked()
	l := md.listingLocked()
	l.ServerTime = now
	ll := &lease.Listing{ServerTime: now}
	ll.Leases = slices.Collect(maps.Values(md.leases))
	for _, a := range md.agents {
		if a.leader != nil {
			ll.Leases = append(ll.Leases, a.leader)
		}
		for _, c := range a.cands {
			ll.Leases = append(ll.Leases, c)
		}
	}
	slices.SortFunc(ll.Leases, func(a, b *lease.Info) int { return cmp.Compare(a.Key, b.Key) })
	for _, k := range slices.Sorted(maps.Keys(md.badLeases)) {
		u := md.badLeases[k]
		ll.Undecodable = append(ll.Undecodable, lease.Undecodable{Key: k, Revision: u.rev, Written: u.written, TTL: u.ttl, Err: u.err})
	}
	return view.StatusJSON(l, view.SplitLeases(ll), queues, staleAfter)
}
