package kv

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// How a stream's copies stand without one server's, as a table: the
// stream's leader and its other copies as STREAM.INFO reports them.
func TestStandIn(t *testing.T) {
	fresh := func(name string) *jetstream.PeerInfo {
		return &jetstream.PeerInfo{Name: name, Current: true, Active: 10 * time.Millisecond}
	}
	stale := &jetstream.PeerInfo{Name: "n3", Current: true, Active: 700 * time.Millisecond} // not heard from since
	lagging := &jetstream.PeerInfo{Name: "n3", Current: false, Lag: 2000, Active: time.Millisecond}
	stopped := &jetstream.PeerInfo{Name: "n3", Current: true, Offline: true, Active: 50 * time.Millisecond}
	lessBehind := &jetstream.PeerInfo{Name: "n3", Current: true, Active: 90 * time.Millisecond}
	for _, tc := range []struct {
		name     string
		server   string
		leader   string
		replicas []*jetstream.PeerInfo
		behind   map[string]bool
		want     standing
	}{
		{"leader, both others current", "n1", "n1", []*jetstream.PeerInfo{fresh("n2"), fresh("n3")}, nil,
			standing{member: true, others: 2, online: 2, current: 2, need: 2, peer: "n2"}},
		{"leader, one other catching up", "n1", "n1", []*jetstream.PeerInfo{fresh("n2"), lagging}, nil,
			standing{member: true, others: 2, online: 2, current: 1, need: 2, peer: "n2"}},
		{"leader, one other not heard from lately", "n1", "n1", []*jetstream.PeerInfo{fresh("n2"), stale}, nil,
			standing{member: true, others: 2, online: 2, current: 1, need: 2, peer: "n2"}},
		{"leader, one other stopped", "n1", "n1", []*jetstream.PeerInfo{fresh("n2"), stopped}, nil,
			standing{member: true, others: 2, online: 1, current: 1, need: 2, peer: "n2"}},
		{"follower, the other follower current", "n2", "n1", []*jetstream.PeerInfo{fresh("n2"), fresh("n3")}, nil,
			standing{member: true, others: 2, online: 2, current: 2, need: 2, peer: "n3"}},
		{"follower, the other follower catching up", "n2", "n1", []*jetstream.PeerInfo{fresh("n2"), lagging}, nil,
			standing{member: true, others: 2, online: 2, current: 1, need: 2}},
		{"no copy", "n9", "n1", []*jetstream.PeerInfo{fresh("n2"), fresh("n3")}, nil,
			standing{others: 3, online: 3, current: 3, need: 3, peer: "n2"}},
		{"one replica", "n1", "n1", nil, nil, standing{member: true}},
		{"two replicas: the other alone", "n1", "n1", []*jetstream.PeerInfo{fresh("n2")}, nil,
			standing{member: true, others: 1, online: 1, current: 1, need: 1, peer: "n2"}},
		{"five replicas: three of four", "n1", "n1", []*jetstream.PeerInfo{fresh("n2"), fresh("n4"), fresh("n5"), lagging}, nil,
			standing{member: true, others: 4, online: 4, current: 3, need: 3, peer: "n2"}},
		{"the copy never seen behind first", "n1", "n1", []*jetstream.PeerInfo{fresh("n2"), lessBehind}, map[string]bool{"n2": true},
			standing{member: true, others: 2, online: 2, current: 2, need: 2, peer: "n3"}},
		{"else the one heard from last", "n1", "n1", []*jetstream.PeerInfo{lessBehind, fresh("n2")}, nil,
			standing{member: true, others: 2, online: 2, current: 2, need: 2, peer: "n2"}},
		{"no leader", "n1", "", []*jetstream.PeerInfo{fresh("n2")}, nil, standing{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := standIn(&jetstream.ClusterInfo{Leader: tc.leader, Replicas: tc.replicas}, tc.server, tc.behind)
			if got != tc.want {
				t.Errorf("standIn(%s) = %+v, want %+v", tc.server, got, tc.want)
			}
		})
	}
}

// The server's refusal of an advisory subscription the client made for
// itself is not passed on: the client works without it.
func TestRefused_AFollowedAdvisoryIsNotPassedOn(t *testing.T) {
	r := newRefusals()
	r.follows["KV_b"] = &nats.Subscription{}
	refusal := func(subject string) error {
		return fmt.Errorf("%w: Permissions Violation for Subscription to %q", nats.ErrPermissionViolation, subject)
	}
	if !r.refused(refusal(advisoryLeaderElected + "KV_b")) {
		t.Error("the refusal of a followed advisory is passed on")
	}
	if r.refused(refusal(advisoryLeaderElected + "KV_other")) {
		t.Error("the refusal of a subscription the client does not follow is not passed on")
	}
}
