package kv

import (
	"context"
	"time"
)

// StreamStatus is where a bucket's stream lives and how its copies are
// doing, as its leader reports it.
type StreamStatus struct {
	Bucket string `json:"bucket"`
	// Cluster is the JetStream cluster's name ("" for a single server).
	Cluster string `json:"cluster,omitempty"`
	// Leader is the name of the server that leads the stream.
	Leader string `json:"leader"`
	// Replicas is the configured number of copies.
	Replicas int `json:"replicas"`
	// Peers are the copies other than the leader's.
	Peers    []PeerStatus `json:"peers"`
	Messages uint64       `json:"messages"`
	Bytes    uint64       `json:"bytes"`
	// LastSeq is the stream's last revision.
	LastSeq uint64 `json:"last_seq"`
}

// PeerStatus is one follower copy of a stream.
type PeerStatus struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	Offline bool   `json:"offline"`
	// Lag is how many operations it is behind the leader.
	Lag uint64 `json:"lag"`
	// Active is how long ago the leader last heard from it.
	Active time.Duration `json:"active_ns"`
}

// Status reads the bucket's stream state from its leader.
func (b *Bucket) Status(ctx context.Context) (StreamStatus, error) {
	info, err := b.c.streamInfo(ctx, b.stream)
	if err != nil {
		return StreamStatus{}, err
	}
	st := StreamStatus{
		Bucket: b.cfg.Name, Replicas: info.Config.Replicas, Peers: []PeerStatus{},
		Messages: info.State.Msgs, Bytes: info.State.Bytes, LastSeq: info.State.LastSeq,
	}
	if ci := info.Cluster; ci != nil {
		st.Cluster, st.Leader = ci.Name, ci.Leader
		for _, p := range ci.Replicas {
			st.Peers = append(st.Peers, PeerStatus{Name: p.Name, Current: p.Current, Offline: p.Offline, Lag: p.Lag, Active: p.Active})
		}
	}
	if st.Leader == "" {
		st.Leader = b.c.nc.ConnectedServerName()
	}
	return st, nil
}
