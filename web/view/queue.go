package view

import (
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
	pending := map[string]any{"total": s.Pending.Total, "by_priority": s.Pending.ByPriority, "by_key": s.Pending.ByKey}
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
	locks := []map[string]any{}
	for _, l := range s.Locks {
		m, err := RecordJSON(l, map[string]any{"ttl_left_ms": l.Expires.Sub(s.ServerTime).Milliseconds()})
		if err != nil {
			return nil, err
		}
		locks = append(locks, m)
	}
	doc := map[string]any{
		"queue":       s.Config.Queue,
		"config":      cfg,
		"server_time": s.ServerTime,
		"counts":      s.Counts,
		"pending":     pending,
		"active": map[string]any{
			"used": s.Active.Used, "max": s.Active.Max, "available": s.Active.Available,
			"by_key": s.Active.ByKey, "by_label": byLabel,
		},
		"locks":       locks,
		"undecodable": s.Undecodable,
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
