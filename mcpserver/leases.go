package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonhq/baton/lease"
)

// LeaseInfo is a lease as the tools show it.
type LeaseInfo struct {
	Key        string            `json:"key" jsonschema:"the leased key"`
	Holder     string            `json:"holder" jsonschema:"the instance holding it"`
	Host       string            `json:"host" jsonschema:"the holder's host"`
	PID        int               `json:"pid" jsonschema:"the holder's process on that host"`
	Fence      uint64            `json:"fence" jsonschema:"grows with every new holder: pass it to whatever you write"`
	Revision   uint64            `json:"revision"`
	AcquiredAt time.Time         `json:"acquired_at" jsonschema:"when the holder took it (holder's clock)"`
	TTLMS      int64             `json:"ttl_ms" jsonschema:"the lease's lifetime without a renewal, in milliseconds"`
	Meta       map[string]string `json:"meta,omitempty"`
}

// LostLease is a lease this server held for the agent and lost.
type LostLease struct {
	Key    string `json:"key" jsonschema:"the lease that was lost"`
	Fence  uint64 `json:"fence"`
	Detail string `json:"detail" jsonschema:"what happened"`
}

func leaseInfoOf(r lease.Record, rev uint64) *LeaseInfo {
	return &LeaseInfo{Key: r.Key, Holder: r.Holder, Host: r.Host, PID: r.PID, Fence: r.Fence, Revision: rev,
		AcquiredAt: r.AcquiredAt, TTLMS: time.Duration(r.TTL).Milliseconds(), Meta: r.Meta}
}

// AcquireInput is acquire_lease's arguments.
type AcquireInput struct {
	Key         string            `json:"key" jsonschema:"the lease's key: a name for what only one holder may do at a time"`
	TTLSeconds  int               `json:"ttl_seconds,omitempty" jsonschema:"how long the lease outlives this server if it stops renewing it, in whole seconds; default 10"`
	WaitSeconds float64           `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the holder to release it, at most 300; default 0: answer at once"`
	Meta        map[string]string `json:"meta,omitempty" jsonschema:"key-value pairs to record with the lease"`
}

// AcquireOutput is acquire_lease's result.
type AcquireOutput struct {
	Acquired bool       `json:"acquired" jsonschema:"true when you now hold the lease"`
	Lease    *LeaseInfo `json:"lease,omitempty" jsonschema:"your lease, when acquired"`
	Holder   *LeaseInfo `json:"holder,omitempty" jsonschema:"who holds it, when refused"`
	Reason   string     `json:"reason,omitempty" jsonschema:"why it was refused: held, undecodable, invalid or unavailable"`
	Lost
}

// ReleaseLeaseInput is release_lease's arguments.
type ReleaseLeaseInput struct {
	Key string `json:"key" jsonschema:"a lease you hold"`
}

// ReleaseLeaseOutput is release_lease's result.
type ReleaseLeaseOutput struct {
	Released bool   `json:"released"`
	Key      string `json:"key"`
	Lost
}

// LeaderInput is leader's arguments.
type LeaderInput struct {
	Key string `json:"key" jsonschema:"the election's key (as given to baton lead KEY)"`
}

// CandidateInfo is a candidate of an election.
type CandidateInfo struct {
	Instance     string    `json:"instance"`
	Host         string    `json:"host"`
	PID          int       `json:"pid"`
	Since        time.Time `json:"since"`
	Score        int       `json:"score"`
	Capabilities []string  `json:"capabilities,omitempty"`
	Eligible     bool      `json:"eligible" jsonschema:"true when it has every capability the election requires"`
}

// LeaderOutput is leader's result.
type LeaderOutput struct {
	Key        string          `json:"key"`
	Leader     *LeaseInfo      `json:"leader,omitempty" jsonschema:"the leader, if any"`
	Candidates []CandidateInfo `json:"candidates" jsonschema:"the live candidates, best first"`
	Lost
}

func (s *Server) addLeaseTools() {
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:  "acquire_lease",
		Title: "Acquire a lease",
		Description: `Take a lease: a key only one holder may hold at a time, for short exclusive actions (a deploy, a migration, a merge).
This server renews it for you until release_lease. If another instance holds it the result has isError, reason "held", and names the holder; do not do the action: call again later, or with wait_seconds.
Reason "unavailable": the baton server cannot be reached; retry in a few seconds.`,
	}, tool(s, s.acquireLease))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "release_lease",
		Title:       "Release a lease",
		Description: `Give up a lease you hold, so another holder can take it. Leases still held when you disconnect are released.`,
	}, tool(s, s.releaseLease))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "leader",
		Title:       "Who leads",
		Description: `Say who leads an election (baton lead KEY) and who the candidates are, best first, without taking part.`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, tool(s, s.leader))
}

// leases returns the leases, connecting first if need be.
func (s *Server) leases(ctx context.Context) (*lease.Leases, error) {
	c, err := s.connected(ctx)
	if err != nil {
		return nil, err
	}
	if c.Leases == nil {
		return nil, errors.New("this server was started without leases")
	}
	return c.Leases, nil
}

// keepLease starts watching a held lease for its end.
func (s *Server) keepLease(l *lease.Lease) {
	stopped := make(chan struct{})
	s.mu.Lock()
	s.leaseHolds[l.Key()] = &leaseHold{l: l, stopped: stopped}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-l.Done():
		case <-stopped:
			return
		}
		s.mu.Lock()
		h := s.leaseHolds[l.Key()]
		if h == nil || h.l != l {
			s.mu.Unlock()
			return
		}
		delete(s.leaseHolds, l.Key())
		lost := LostLease{Key: l.Key(), Fence: l.Fence(), Detail: fmt.Sprint(l.Err())}
		s.lostLeases = append(s.lostLeases, lost)
		s.mu.Unlock()
		s.report(fmt.Sprintf("%s; the agent must stop acting on lease %s", lost.Detail, lost.Key),
			map[string]any{"event": "lease_lost", "key": lost.Key, "fence": lost.Fence, "message": lost.Detail})
	}()
}

// leaseHold is a lease the server holds for the agent.
type leaseHold struct {
	l       *lease.Lease
	stopped chan struct{}
}

// releaseLeaseKey releases key's lease, if held.
func (s *Server) releaseLeaseKey(ctx context.Context, key string) error {
	s.mu.Lock()
	h := s.leaseHolds[key]
	delete(s.leaseHolds, key)
	s.mu.Unlock()
	if h == nil {
		return fmt.Errorf("%w: lease %s", ErrNotHeld, key)
	}
	close(h.stopped)
	err := h.l.Release(ctx)
	if err == nil {
		return nil
	}
	s.retryInBackground(h.l.TTL(), h.l.Release)
	return fmt.Errorf("%w: %w", ErrClosePending, err)
}

func (s *Server) acquireLease(ctx context.Context, _ *mcp.CallToolRequest, in AcquireInput) (*mcp.CallToolResult, AcquireOutput, error) {
	lost := s.drainLost()
	out := AcquireOutput{Lost: lost}
	if in.WaitSeconds < 0 || in.WaitSeconds > 300 {
		out.Reason = "invalid"
		return withLost(refusal("invalid arguments: wait_seconds %g: want 0 to 300", in.WaitSeconds), lost), out, nil
	}
	s.mu.Lock()
	h := s.leaseHolds[in.Key]
	s.mu.Unlock()
	if h != nil {
		out.Acquired, out.Lease = true, leaseInfoOf(h.l.Record(), h.l.Revision())
		return summary(lost, "you already hold lease %s (fence %d)", in.Key, h.l.Fence()), out, nil
	}
	ls, err := s.leases(ctx)
	if err != nil {
		out.Reason = "unavailable"
		return withLost(unavailable("acquire lease "+in.Key, err), lost), out, nil
	}
	opts := []lease.AcquireOption{lease.WithMeta(in.Meta)}
	if in.TTLSeconds != 0 {
		opts = append(opts, lease.WithTTL(time.Duration(in.TTLSeconds)*time.Second))
	}
	var l *lease.Lease
	if in.WaitSeconds > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(in.WaitSeconds*float64(time.Second)))
		l, err = ls.Acquire(wctx, in.Key, opts...)
		cancel()
	} else {
		l, err = ls.TryAcquire(ctx, in.Key, opts...)
	}
	var held *lease.HeldError
	switch {
	case errors.As(err, &held) && held.Holder != nil:
		out.Reason, out.Holder = "held", leaseInfoOf(*held.Holder, held.Revision)
		return withLost(refusal("lease %s is held by instance %s (host %s, pid %d, since %s): do not do what it guards; call acquire_lease again later, or with wait_seconds",
			in.Key, held.Holder.Holder, held.Holder.Host, held.Holder.PID, held.Holder.AcquiredAt.UTC().Format(time.RFC3339)), lost), out, nil
	case errors.As(err, &held):
		out.Reason = "undecodable"
		return withLost(refusal("lease %s holds a record baton cannot read, so it is treated as held: ask an operator to run `baton doctor`; %v", in.Key, err), lost), out, nil
	case errors.Is(err, lease.ErrInvalid):
		out.Reason = "invalid"
		return withLost(refusal("invalid arguments: %v", err), lost), out, nil
	case err != nil:
		out.Reason = "unavailable"
		return withLost(unavailable("acquire lease "+in.Key, err), lost), out, nil
	}
	s.keepLease(l)
	out.Acquired, out.Lease = true, leaseInfoOf(l.Record(), l.Revision())
	return summary(lost, "acquired lease %s (fence %d); it is renewed for you until release_lease", in.Key, l.Fence()), out, nil
}

func (s *Server) releaseLease(ctx context.Context, _ *mcp.CallToolRequest, in ReleaseLeaseInput) (*mcp.CallToolResult, ReleaseLeaseOutput, error) {
	lost := s.drainLost()
	out := ReleaseLeaseOutput{Key: in.Key, Lost: lost}
	err := s.releaseLeaseKey(ctx, in.Key)
	switch {
	case errors.Is(err, ErrNotHeld):
		return withLost(refusal("not held: you do not hold lease %s through this server; nothing to release", in.Key), lost), out, nil
	case errors.Is(err, ErrClosePending):
		return withLost(refusal("the baton server did not answer (%v): the lease is yours no more and baton keeps trying to release it, or it expires by its TTL", err), lost), out, nil
	case err != nil:
		return withLost(unavailable("release lease "+in.Key, err), lost), out, nil
	}
	out.Released = true
	return summary(lost, "released lease %s", in.Key), out, nil
}

func (s *Server) leader(ctx context.Context, _ *mcp.CallToolRequest, in LeaderInput) (*mcp.CallToolResult, LeaderOutput, error) {
	lost := s.drainLost()
	out := LeaderOutput{Key: in.Key, Candidates: []CandidateInfo{}, Lost: lost}
	ls, err := s.leases(ctx)
	if err != nil {
		return withLost(unavailable("leader "+in.Key, err), lost), out, nil
	}
	e, err := ls.Election(in.Key)
	if err != nil {
		return withLost(refusal("invalid arguments: %v", err), lost), out, nil
	}
	lead, err := e.Leader(ctx)
	if err != nil && !errors.Is(err, lease.ErrNotFound) {
		return withLost(unavailable("leader "+in.Key, err), lost), out, nil
	}
	cands, err := e.Candidates(ctx)
	if err != nil {
		return withLost(unavailable("leader "+in.Key, err), lost), out, nil
	}
	for _, c := range cands {
		out.Candidates = append(out.Candidates, CandidateInfo{Instance: c.Instance, Host: c.Host, PID: c.PID, Since: c.Since,
			Score: c.Score, Capabilities: c.Capabilities, Eligible: c.Eligible})
	}
	if lead == nil {
		return summary(lost, "%s has no leader; %d candidates", in.Key, len(cands)), out, nil
	}
	out.Leader = leaseInfoOf(lead.Record, lead.Revision)
	names := make([]string, 0, len(cands))
	for _, c := range cands {
		names = append(names, c.Instance)
	}
	return summary(lost, "%s is led by instance %s (host %s, pid %d, fence %d); candidates: %s",
		in.Key, lead.Holder, lead.Host, lead.PID, lead.Fence, strings.Join(names, ", ")), out, nil
}
