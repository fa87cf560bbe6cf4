package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/kv"
)

// DefaultPreferMargin is how much higher a candidate's score must be than
// the leader's for the leader to hand over to it.
const DefaultPreferMargin = 1

// ElectionOption configures an Election.
type ElectionOption func(*electionConfig) error

type electionConfig struct {
	ttl     time.Duration
	minTerm time.Duration
	score   int
	caps    []string
	require []string
	margin  int
	grace   time.Duration
}

// ElectTTL sets the TTL of the leader's lease and of each candidacy: a
// leader that dies is replaced within it (at once on its own host).
// Default: DefaultTTL.
func ElectTTL(d time.Duration) ElectionOption {
	return func(c *electionConfig) error {
		if err := kv.ValidateTTL(d); err != nil {
			return fmt.Errorf("%w: ttl: %w", ErrInvalid, err)
		}
		c.ttl = d
		return nil
	}
}

// MinTerm is how long a leader leads before a candidate with a higher score
// can take over from it (explicit transfers and resignations are not held
// back). Default: 0.
func MinTerm(d time.Duration) ElectionOption {
	return func(c *electionConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: min term %s is negative", ErrInvalid, d)
		}
		c.minTerm = d
		return nil
	}
}

// Score is this candidate's score: the leader hands over to a present,
// eligible candidate whose score is at least PreferMargin higher than its
// own, once its minimum term has passed. Default: 0.
func Score(n int) ElectionOption {
	return func(c *electionConfig) error { c.score = n; return nil }
}

// PreferMargin sets how much higher a score must be to take over: the
// hysteresis that keeps close scores from trading leadership. Default:
// DefaultPreferMargin.
func PreferMargin(n int) ElectionOption {
	return func(c *electionConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: prefer margin %d must be at least 1", ErrInvalid, n)
		}
		c.margin = n
		return nil
	}
}

// Capabilities declares what this candidate can do. Default: none.
func Capabilities(caps ...string) ElectionOption {
	return func(c *electionConfig) error { c.caps = slices.Clone(caps); return nil }
}

// Require makes only candidates with all of caps eligible to lead; the
// others follow. Default: none.
func Require(caps ...string) ElectionOption {
	return func(c *electionConfig) error { c.require = slices.Clone(caps); return nil }
}

// Grace is the time the leader needs to stop its work when it must give
// leadership up (see WithGrace). Default: 0.
func Grace(d time.Duration) ElectionOption {
	return func(c *electionConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: grace %s is negative", ErrInvalid, d)
		}
		c.grace = d
		return nil
	}
}

// Election elects one leader among the instances campaigning for an agent
// key. Its methods are safe for concurrent use.
type Election struct {
	ls         *Leases
	key        string
	leaderKey  string
	candPrefix string
	cfg        electionConfig

	mu   sync.Mutex
	cand *Lease // this instance's candidacy
}

// LeaderKey is the lease an agent key's leader holds: leader.<key>.
func LeaderKey(key string) string { return "leader." + key }

// CandidateKey is an instance's candidacy: candidate.<key>.<instance>.
func CandidateKey(key, instance string) string { return "candidate." + key + "." + instance }

// AgentKeyOf says what a lease key held by holder is: the leader of agent
// key agentKey (leader.<key>), a candidacy for it (candidate.<key>.<holder>:
// the holder tells the key from the instance, as agent keys may hold dots),
// or neither, a plain lease.
func AgentKeyOf(leaseKey, holder string) (agentKey string, leader, candidacy bool) {
	if k, ok := strings.CutPrefix(leaseKey, "leader."); ok {
		return k, true, false
	}
	if rest, ok := strings.CutPrefix(leaseKey, "candidate."); ok && holder != "" {
		if k, ok := strings.CutSuffix(rest, "."+holder); ok && k != "" {
			return k, false, true
		}
	}
	return "", false, false
}

// ValidateCandidate refuses (ErrInvalid) an instance id that may not
// campaign: one with a dot, since in candidate.KEY.INSTANCE the key
// candidate.a.b.c would be both agent key a.b's candidacy of c and a's of
// b.c (adr/0024). Any instance id may observe an election.
func ValidateCandidate(instance string) error {
	if strings.Contains(instance, ".") {
		return fmt.Errorf("%w: instance id %q: an instance that campaigns may not contain '.' (its candidacy key would be ambiguous); use letters, digits, '-' and '_'", ErrInvalid, instance)
	}
	return nil
}

// Election returns the election of the agent key, as this instance.
func (ls *Leases) Election(key string, opts ...ElectionOption) (*Election, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	cfg := electionConfig{ttl: DefaultTTL, margin: DefaultPreferMargin}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &Election{ls: ls, key: key, leaderKey: LeaderKey(key), candPrefix: CandidateKey(key, ""), cfg: cfg}, nil
}

// Key is the agent key.
func (e *Election) Key() string { return e.key }

// Eligible reports whether this candidate may lead.
func (e *Election) Eligible() bool {
	return Record{Capabilities: e.cfg.caps}.HasAll(e.cfg.require)
}

func (e *Election) leaseOpts() []AcquireOption {
	return []AcquireOption{
		WithTTL(e.cfg.ttl), WithScore(e.cfg.score), WithCapabilities(e.cfg.caps...), withRequire(e.cfg.require...), WithGrace(e.cfg.grace),
	}
}

// candidacy registers (or keeps) this instance's candidacy: a lease of its
// own, renewed while it lives, so candidates vanish with their process.
func (e *Election) candidacy(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cand != nil && e.cand.Err() == nil {
		return nil
	}
	if err := ValidateCandidate(e.ls.instance); err != nil {
		return err
	}
	l, err := e.ls.acquireKey(ctx, CandidateKey(e.key, e.ls.instance), noWait, e.leaseOpts())
	if err != nil {
		return err
	}
	e.cand = l
	return nil
}

// Campaign registers this instance as a candidate and waits until it leads,
// or ctx is done. It is woken by the watch of the leader's lease: a
// released or expired leader is replaced within a round trip, a leader on
// this host whose process and child are dead at once, and a leader that
// hands over to this instance makes it lead with no gap. A candidate that
// lacks a required capability gets ErrNotEligible (it may still Observe).
//
// A candidacy that lapses while it waits (the process was paused, or cut
// off from the server, past the TTL) is registered again, so the instance
// stays visible to handovers and to Candidates.
func (e *Election) Campaign(ctx context.Context) (*Term, error) {
	for {
		if err := e.candidacy(ctx); err != nil {
			return nil, err
		}
		if !e.Eligible() {
			return nil, fmt.Errorf("%w: %s requires %s, this candidate has %s", ErrNotEligible, e.key,
				strings.Join(e.cfg.require, ","), strings.Join(e.cfg.caps, ","))
		}
		e.mu.Lock()
		cand := e.cand
		e.mu.Unlock()
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-cand.Done():
				cancel()
			case <-wctx.Done():
			}
		}()
		l, err := e.ls.acquireKey(wctx, e.leaderKey, waitRacing, e.leaseOpts())
		cancel()
		switch {
		case err == nil:
			return e.newTerm(l), nil
		case ctx.Err() == nil && cand.Err() != nil:
			continue // the candidacy lapsed while waiting: stand again
		default:
			return nil, err
		}
	}
}

// Withdraw ends this instance's candidacy (leadership, if any, is the
// Term's to end). Idempotent.
func (e *Election) Withdraw(ctx context.Context) error {
	e.mu.Lock()
	cand := e.cand
	e.cand = nil
	e.mu.Unlock()
	if cand == nil {
		return nil
	}
	return cand.Release(ctx)
}

// ServerTime is the server's clock (the leases bucket's stream leader).
func (e *Election) ServerTime(ctx context.Context) (time.Time, error) {
	return e.ls.bucket.ServerTime(ctx)
}

// Leader returns the current leader's lease, or ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (*Info, error) {
	in, err := e.ls.Get(ctx, e.leaderKey)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNoLeader, e.key)
	}
	return in, err
}

// Candidate is an instance campaigning for the key.
type Candidate struct {
	Instance     string
	Host         string
	PID          int
	Since        time.Time
	Score        int
	Capabilities []string
	// Eligible: it has every capability the election requires: this
	// Election's, and its own (Record.Require).
	Eligible bool
	// Written is the server time of its last renewal.
	Written time.Time
	TTL     time.Duration
}

// Candidates lists the live candidates, best first: eligible before not,
// then by score, then by how long they have been candidates.
func (e *Election) Candidates(ctx context.Context) ([]Candidate, error) {
	l, err := e.ls.list(ctx, e.candPrefix+">")
	if err != nil {
		return nil, err
	}
	return e.candidatesOf(l.Leases), nil
}

func (e *Election) candidatesOf(infos []*Info) []Candidate {
	out := make([]Candidate, 0, len(infos))
	for _, in := range infos {
		if e.isCandidacy(in.Key, in.Holder) {
			out = append(out, e.candidateOf(in))
		}
	}
	sortCandidates(out)
	return out
}

// isCandidacy reports whether the lease key held by holder is a candidacy
// of this election. Not every key under candidate.KEY. is: those of an
// election whose key extends KEY with a dot ("chat.eu" for "chat") are
// there too, and name a holder of theirs.
func (e *Election) isCandidacy(key, holder string) bool { return key == CandidateKey(e.key, holder) }

func (e *Election) candidateOf(in *Info) Candidate {
	return Candidate{
		Instance: in.Holder, Host: in.Host, PID: in.PID, Since: in.AcquiredAt, Score: in.Score,
		Capabilities: in.Capabilities, Eligible: in.HasAll(e.cfg.require) && in.Eligible(), Written: in.Written, TTL: in.TTL,
	}
}

func sortCandidates(cs []Candidate) {
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.Eligible != b.Eligible {
			return a.Eligible
		}
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		return a.Since.Before(b.Since)
	})
}

// candidate returns one live candidate by instance, or ErrNoCandidate.
func (e *Election) candidate(ctx context.Context, instance string) (Candidate, *Info, error) {
	in, err := e.ls.Get(ctx, CandidateKey(e.key, instance))
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrUndecodable) {
		return Candidate{}, nil, fmt.Errorf("%w: %s is not campaigning for %s", ErrNoCandidate, instance, e.key)
	}
	if err != nil {
		return Candidate{}, nil, err
	}
	return e.candidateOf(in), in, nil
}

// RequestResign asks the leader to step down for the best other eligible
// candidate (the first in Candidates' order) and returns whom it asked
// for, as RequestTransfer does. With no other eligible candidate the
// leader stays: ErrNoCandidate; with no leader, ErrNoLeader.
func (e *Election) RequestResign(ctx context.Context) (string, error) {
	leader, err := e.Leader(ctx)
	if err != nil {
		return "", err
	}
	cands, err := e.Candidates(ctx)
	if err != nil {
		return "", err
	}
	for _, c := range cands {
		if c.Instance != leader.Holder && c.Eligible {
			return c.Instance, e.RequestTransfer(ctx, c.Instance)
		}
	}
	return "", fmt.Errorf("%w: %s has no other eligible candidate to step down for; the leader stays", ErrNoCandidate, e.key)
}

// RequestTransfer asks the leader to hand leadership to the candidate to,
// from any process: it writes transfer_to into the leader's lease (a CAS
// update that keeps its holder and fence, and does not extend its life).
// The leader, seeing it, stops its work and hands over with no moment
// without a leader; WaitLeader waits for that. The target must be a live,
// eligible candidate, and the leader a candidate too (one that is not, say
// a lease taken by hand, cannot hand over): ErrNoCandidate otherwise; with
// no leader it is ErrNoLeader.
func (e *Election) RequestTransfer(ctx context.Context, to string) error {
	c, _, err := e.candidate(ctx, to)
	if err != nil {
		return err
	}
	if !c.Eligible {
		return fmt.Errorf("%w: %s may not lead: it lacks a capability its election requires (it has %q)", ErrNoCandidate, to,
			strings.Join(c.Capabilities, ","))
	}
	for attempt := 1; ; attempt++ {
		cur, err := e.Leader(ctx)
		if err != nil {
			return err
		}
		if cur.Holder == to {
			return nil
		}
		if _, _, err := e.candidate(ctx, cur.Holder); err != nil {
			return fmt.Errorf("%w: the leader %s is no candidate (its process may be gone, or the lease was taken by hand): it cannot hand over", ErrNoCandidate, cur.Holder)
		}
		// Keep the lease's expiry where it is: a request must not keep a
		// dead leader alive.
		now, err := e.ServerTime(ctx)
		if err != nil {
			return err
		}
		left := cur.Written.Add(cur.TTL).Sub(now).Truncate(time.Second)
		if left < time.Second {
			return fmt.Errorf("%w: the leader's lease ends within a second; ask again when it has changed", kv.ErrConflict)
		}
		next := cur.Record.clone()
		next.TransferTo = to
		data, err := encode(next)
		if err != nil {
			return err
		}
		_, err = e.ls.bucket.Update(ctx, e.leaderKey, data, left, cur.Revision)
		if err == nil || !errors.Is(err, kv.ErrConflict) || attempt == 4 {
			return err
		}
	}
}
