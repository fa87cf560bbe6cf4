package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/session"
)

// checkLeases reports the leases bucket's settings, undecodable and stale
// leases, leases the server should have expired, and leaders whose holder
// is no candidate any more.
func (c *Checker) checkLeases(ctx context.Context, r *Report) error {
	present, err := c.checkBucketConfig(ctx, r, lease.BucketConfig(c.ls.Prefix(), c.replicas))
	if err != nil || !present {
		return err
	}
	l, err := c.ls.List(ctx)
	if err != nil {
		return err
	}
	for _, u := range l.Undecodable {
		u := u
		ttl := u.TTL
		if ttl == 0 {
			ttl = lease.DefaultTTL
		}
		t := session.TimingAt(u.Written, ttl, l.ServerTime, c.staleAfter)
		f := Finding{
			Kind: KindUndecodable, Key: u.Key,
			Detail: fmt.Sprintf("lease %s holds a record that does not decode (revision %d, written %s ago): %v; nobody can take it",
				u.Key, u.Revision, t.Age.Round(time.Millisecond), u.Err),
			Action: "inspect it (`nats kv get " + c.ls.Bucket().Name() + " " + u.Key + "`); `baton doctor --fix` removes it once it is stale",
		}
		if t.State != session.StateLive {
			f.fix = func(ctx context.Context) error { return c.ls.Reap(ctx, u.Key, u.Revision) }
		}
		c.add(r, f)
	}
	candidates := map[string]bool{}
	for _, in := range l.Leases {
		if strings.HasPrefix(in.Key, "candidate.") {
			candidates[in.Key] = true
		}
	}
	for _, in := range l.Leases {
		for _, f := range c.leaseFindings(in, l.ServerTime, candidates) {
			c.add(r, f)
		}
	}
	return nil
}

// expiryGrace is how long past its TTL a key may still be listed before
// it is a finding: the server expires keys on a tick, within a second.
const expiryGrace = 2 * time.Second

// leaseFindings judges one lease at the server time now; candidates holds
// the keys of live candidacies.
func (c *Checker) leaseFindings(in *lease.Info, now time.Time, candidates map[string]bool) []Finding {
	var out []Finding
	t := session.TimingAt(in.Written, in.TTL, now, c.staleAfter)
	switch {
	case t.State == session.StateExpiring && -t.Left < expiryGrace:
		// The server removes it at its next expiry tick: nothing to say.
	case t.State == session.StateExpiring:
		out = append(out, Finding{
			Kind: KindExpiredVisible, Key: in.Key,
			Detail: fmt.Sprintf("lease %s (instance %s, fence %d) expired %s ago by the server's clock and is still there",
				in.Key, in.Holder, in.Fence, (-t.Left).Round(time.Millisecond)),
			Action: "the server removes expired keys within a second; one that stays points at a stuck server (see its logs)",
		})
	case t.State == session.StateStale:
		if strings.HasPrefix(in.Key, "leader.") || strings.HasPrefix(in.Key, "candidate.") {
			break // kept by a process that retries its renewals; it expires by itself
		}
		out = append(out, Finding{
			Kind: KindStale, Key: in.Key,
			Detail: fmt.Sprintf("lease %s (instance %s, host %s, pid %d, fence %d) not renewed for %s; it expires in %s",
				in.Key, in.Holder, in.Host, in.PID, in.Fence, t.Age.Round(time.Millisecond), t.Left.Round(time.Millisecond)),
			Action: "its holder should renew it; `baton doctor --fix` removes it unless it is renewed meanwhile",
			fix:    func(ctx context.Context) error { return c.ls.Reap(ctx, in.Key, in.Revision) },
		})
	}
	if agent, ok := strings.CutPrefix(in.Key, "leader."); ok && !candidates[lease.CandidateKey(agent, in.Holder)] {
		out = append(out, Finding{
			Kind: KindLeaderWithoutCandidate, Key: in.Key,
			Detail: fmt.Sprintf("%s is led by instance %s (host %s, pid %d), which is no candidate: its process may be gone; the lease expires in %s",
				agent, in.Holder, in.Host, in.PID, max(t.Left, 0).Round(time.Millisecond)),
			Action: fmt.Sprintf("see `baton leader %s`; a follower takes over when the lease expires", agent),
		})
	}
	return out
}
