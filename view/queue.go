package view

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/batonhq/baton/internal/jsonappend"
	"github.com/batonhq/baton/queue"
)

// QueueConfigJSON is a queue's config as --json prints it: the record plus
// its revision.
func QueueConfigJSON(c queue.Config) (map[string]any, error) {
	return RecordJSON(c, map[string]any{"revision": c.Revision})
}

// TaskJSON is a task as --json prints it: its record plus revision,
// written_at (server time of the revision) and expires_at (when a finished
// task goes, if it does).
func TaskJSON(t *queue.Task) (map[string]any, error) {
	extra := map[string]any{"revision": t.Revision}
	if !t.Written.IsZero() {
		extra["written_at"] = t.Written
	}
	if !t.Expires.IsZero() {
		extra["expires_at"] = t.Expires
	}
	if nb := t.NotBefore(); t.State == queue.StatePending && !nb.IsZero() {
		extra["not_before"] = nb
	}
	return RecordJSON(t, extra)
}

// QueueStatusJSON is `baton queue status --json`. by, when not empty, keeps
// only that label in active.by_label; with tasks, every task read is listed
// (without its payload).
func QueueStatusJSON(s *queue.Snapshot, by string, tasks bool) (map[string]any, error) {
	cfg, err := QueueConfigJSON(s.Config)
	if err != nil {
		return nil, err
	}
	pending := map[string]any{"total": s.Pending.Total, "by_priority": s.Pending.ByPriority, "by_key": keyCounts(s.Pending.ByKey), "delayed": s.Pending.Delayed}
	if !s.Pending.NextAt.IsZero() {
		pending["next_at"] = s.Pending.NextAt
	}
	if s.Pending.OldestID != "" {
		pending["oldest_id"] = s.Pending.OldestID
		pending["oldest_added_at"] = s.Pending.Oldest
		pending["oldest_age_ms"] = s.Pending.OldestAge.Milliseconds()
	}
	byLabel := s.Active.ByLabel
	if by != "" {
		byLabel = map[string]map[string]int{by: s.Active.ByLabel[by]}
		if byLabel[by] == nil {
			byLabel[by] = map[string]int{}
		}
	}
	locks := make([]lockRow, 0, len(s.Locks))
	for _, l := range s.Locks {
		locks = append(locks, lockRow{l, l.Expires.Sub(s.ServerTime).Milliseconds()})
	}
	doc := map[string]any{
		"queue":        s.Config.Queue,
		"config":       cfg,
		"server_time":  s.ServerTime,
		"paused":       s.Config.Paused,
		"paused_keys":  s.PausedKeys(),
		"schedules":    scheduleRows(s),
		"key_settings": keySettings(s),
		"counts":       s.Counts,
		"pending":      pending,
		"active": map[string]any{
			"used": s.Active.Used, "max": s.Active.Max, "available": s.Active.Available,
			"by_key": s.Active.ByKey, "by_label": byLabel,
		},
		"locks":       locks,
		"undecodable": s.Undecodable,
		"records":     s.Records,
	}
	if tasks {
		list := []map[string]any{}
		for _, t := range s.Tasks {
			m, err := TaskJSON(t)
			if err != nil {
				return nil, err
			}
			delete(m, "payload")
			list = append(list, m)
		}
		doc["tasks"] = list
	}
	return doc, nil
}

// lockRow is a key lock as queue status --json prints it: the lock's
// members and ttl_left_ms, sorted by name, byte for byte what RecordJSON's
// map of them gave (a test compares them), written member by member: a
// queue's status may list thousands.
type lockRow struct {
	l       queue.Lock
	ttlLeft int64
}

// MarshalJSON writes the row.
func (r lockRow) MarshalJSON() ([]byte, error) {
	l := r.l
	w := jsonappend.New(320 + len(l.Key) + len(l.Slot) + len(l.Task))
	w.Raw(`{"acquired_at":`)
	w.Time(l.Acquired)
	if l.Attempt != 0 {
		w.Raw(`,"attempt":`)
		w.Int(int64(l.Attempt))
	}
	w.Raw(`,"expires_at":`)
	w.Time(l.Expires)
	w.Raw(`,"fence":`)
	w.Uint(l.Fence)
	w.Raw(`,"host":`)
	w.Str(l.Host)
	w.Raw(`,"instance":`)
	w.Str(l.Instance)
	w.Raw(`,"key":`)
	w.Str(l.Key)
	w.Raw(`,"lane":`)
	w.Int(int64(l.Lane))
	w.Raw(`,"pid":`)
	w.Int(int64(l.PID))
	w.Raw(`,"renewed_at":`)
	w.Time(l.Renewed)
	w.Raw(`,"revision":`)
	w.Uint(l.Revision)
	w.Raw(`,"slot":`)
	w.Str(l.Slot)
	w.Raw(`,"state":`)
	w.Str(l.State)
	w.Raw(`,"task":`)
	w.Str(l.Task)
	w.Raw(`,"ttl_left_ms":`)
	w.Int(r.ttlLeft)
	w.Raw(`}`)
	if !w.OK {
		m, err := RecordJSON(l, map[string]any{"ttl_left_ms": r.ttlLeft})
		if err != nil {
			return nil, err
		}
		return json.Marshal(m)
	}
	return w.B, nil
}

// keyCounts are pending tasks by key as queue status --json prints them:
// written member by member in the keys' order, as encoding/json writes the
// map (a test compares them).
type keyCounts map[string]queue.KeyCount

// MarshalJSON writes the counts.
func (k keyCounts) MarshalJSON() ([]byte, error) {
	if k == nil {
		return []byte("null"), nil
	}
	w := jsonappend.New(2 + 48*len(k))
	w.Raw("{")
	for i, key := range slices.Sorted(maps.Keys(k)) {
		if i > 0 {
			w.Raw(",")
		}
		c := k[key]
		w.Str(key)
		w.Raw(`:{"high":`)
		w.Int(int64(c.High))
		w.Raw(`,"normal":`)
		w.Int(int64(c.Normal))
		w.Raw(`,"low":`)
		w.Int(int64(c.Low))
		w.Raw("}")
	}
	w.Raw("}")
	return w.B, nil
}

// scheduleRows are a queue's schedules as status --json lists them: what
// each adds, when, and its last and next tick.
func scheduleRows(s *queue.Snapshot) []map[string]any {
	out := []map[string]any{}
	for _, sc := range s.Schedules {
		row := map[string]any{"name": sc.Name, "key": sc.Key, "priority": sc.Priority, "catch_up": sc.CatchUp, "paused": sc.Paused}
		if sc.Every > 0 {
			row["every"] = time.Duration(sc.Every).String()
		} else {
			row["cron"], row["timezone"] = sc.Cron, sc.Timezone
		}
		if !sc.LastTick.IsZero() {
			row["last_tick"] = sc.LastTick
		}
		if next := sc.NextTick(s.ServerTime); !next.IsZero() {
			row["next_tick"] = next
		}
		out = append(out, row)
	}
	return out
}

// keySettings are the keys with settings of their own, as status --json
// lists them.
func keySettings(s *queue.Snapshot) []map[string]any {
	out := []map[string]any{}
	for _, k := range s.Keys {
		row := map[string]any{"key": k.Key, "paused": k.Paused, "per_key": k.Lanes(s.Config), "weight": max(k.Weight, 1), "rate": nil}
		if r := k.Rate; r != nil {
			row["rate"] = r // its own; the queue's key_rate is in the config
		}
		out = append(out, row)
	}
	return out
}
