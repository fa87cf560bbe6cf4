package view

import (
	"time"

	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

// Leases is a leases listing as status shows it: plain leases, and leaders
// with their candidates.
type Leases struct {
	Plain       []*lease.Info
	Leaders     []*lease.Info
	Candidates  map[string][]*lease.Info // by agent key
	Undecodable []lease.Undecodable
	ServerTime  time.Time
}

// SplitLeases sorts a listing's leases into plain ones, leaders and
// candidacies (lease.AgentKeyOf), keeping their order.
func SplitLeases(l *lease.Listing) Leases {
	v := Leases{Candidates: map[string][]*lease.Info{}, Undecodable: l.Undecodable, ServerTime: l.ServerTime}
	for _, in := range l.Leases {
		switch ak, leader, cand := lease.AgentKeyOf(in.Key, in.Holder); {
		case leader:
			v.Leaders = append(v.Leaders, in)
		case cand:
			v.Candidates[ak] = append(v.Candidates[ak], in)
		default:
			v.Plain = append(v.Plain, in)
		}
	}
	return v
}

// StatusJSON is `baton status --json`: every session, plain lease and
// leader (with its agent_key and its candidates' instances), and queues.
func StatusJSON(l *session.Listing, v Leases, queues []queue.Summary, staleAfter time.Duration) (map[string]any, error) {
	rows := make([]any, 0, len(l.Sessions)+len(l.Undecodable))
	for _, s := range l.Sessions {
		rows = append(rows, sessionRowValue{s, l.ServerTime, staleAfter})
	}
	for _, u := range l.Undecodable {
		rows = append(rows, UndecodableRow(u.Slot, "slot", u.Revision, u.Written, u.TTL, u.Err, l.ServerTime, staleAfter))
	}
	leases := []map[string]any{}
	for _, in := range v.Plain {
		row, err := LeaseRow(in, v.ServerTime, staleAfter)
		if err != nil {
			return nil, err
		}
		leases = append(leases, row)
	}
	for _, u := range v.Undecodable {
		leases = append(leases, UndecodableRow(u.Key, "key", u.Revision, u.Written, u.TTL, u.Err, v.ServerTime, staleAfter))
	}
	leaders := []map[string]any{}
	for _, in := range v.Leaders {
		row, err := LeaseRow(in, v.ServerTime, staleAfter)
		if err != nil {
			return nil, err
		}
		agent, _, _ := lease.AgentKeyOf(in.Key, in.Holder)
		row["agent_key"] = agent
		cands := []string{}
		for _, c := range v.Candidates[agent] {
			cands = append(cands, c.Holder)
		}
		row["candidates"] = cands
		leaders = append(leaders, row)
	}
	return map[string]any{
		"sessions":    rows,
		"leases":      leases,
		"leaders":     leaders,
		"queues":      append([]queue.Summary{}, queues...),
		"server_time": l.ServerTime,
	}, nil
}
