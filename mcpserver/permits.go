package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonhq/baton/sem"
)

// PermitInfo is a semaphore permit as the tools show it.
type PermitInfo struct {
	Name   string `json:"name" jsonschema:"the semaphore"`
	Permit string `json:"permit" jsonschema:"the permit's id: pass it to release_permit"`
	Index  int    `json:"index" jsonschema:"0 to max-1, held by no other live permit: derive a port, a database or a directory from it"`
	Weight int    `json:"weight" jsonschema:"how many of the semaphore's units it holds"`
	Units  []int  `json:"units"`
	Fence  uint64 `json:"fence,omitempty" jsonschema:"grows with every new permit: pass it to whatever you write"`
	Host   string `json:"host"`
	PID    int    `json:"pid"`
}

// LostPermit is a permit this server held for the agent and lost.
type LostPermit struct {
	Name   string `json:"name"`
	Permit string `json:"permit"`
	Detail string `json:"detail" jsonschema:"what happened"`
}

// AcquirePermitInput is acquire_permit's arguments.
type AcquirePermitInput struct {
	Name        string            `json:"name" jsonschema:"the semaphore: a shared thing only so many may use at once (made with baton sem create NAME --max N)"`
	Weight      int               `json:"weight,omitempty" jsonschema:"how many units to hold; default 1"`
	TTLSeconds  int               `json:"ttl_seconds,omitempty" jsonschema:"how long the permit outlives this server if it stops renewing it, in whole seconds; default 30"`
	WaitSeconds float64           `json:"wait_seconds,omitempty" jsonschema:"how long to wait in line for enough units, at most 300; default 0: answer at once"`
	Meta        map[string]string `json:"meta,omitempty" jsonschema:"key-value pairs to record with the permit"`
}

// AcquirePermitOutput is acquire_permit's result.
type AcquirePermitOutput struct {
	Acquired bool        `json:"acquired" jsonschema:"true when you now hold the permit"`
	Permit   *PermitInfo `json:"permit,omitempty" jsonschema:"your permit, when acquired"`
	Free     int         `json:"free,omitempty" jsonschema:"units free, when refused"`
	Waiting  int         `json:"waiting,omitempty" jsonschema:"waiters ahead, when refused"`
	Reason   string      `json:"reason,omitempty" jsonschema:"why it was refused: full, not_found, invalid or unavailable"`
	Lost
}

// ReleasePermitInput is release_permit's arguments.
type ReleasePermitInput struct {
	Permit string `json:"permit" jsonschema:"the id of a permit you hold, as acquire_permit gave it"`
}

// ReleasePermitOutput is release_permit's result.
type ReleasePermitOutput struct {
	Released bool   `json:"released"`
	Permit   string `json:"permit"`
	Lost
}

// SemStatusInput is sem_status's arguments.
type SemStatusInput struct {
	Name string `json:"name" jsonschema:"the semaphore"`
}

// SemStatusOutput is sem_status's result.
type SemStatusOutput struct {
	Status *sem.Status `json:"status,omitempty"`
	Lost
}

func (s *Server) addPermitTools() {
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:  "acquire_permit",
		Title: "Acquire a semaphore permit",
		Description: `Take a permit of a semaphore: a shared thing only so many may use at once (a test database, a GPU, a heavy test suite).
Call it before using the thing; use the index it returns to pick your copy (a port, a database name). This server renews the permit for you until release_permit.
If the semaphore is full the result has isError and reason "full": do not use the thing; call again with wait_seconds to wait your turn in line.`,
	}, tool(s, s.acquirePermit))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "release_permit",
		Title:       "Release a semaphore permit",
		Description: `Give a permit back as soon as you are done with what it guards, so the next in line gets it. Permits still held when you disconnect are released.`,
	}, tool(s, s.releasePermit))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "sem_status",
		Title:       "Semaphore status",
		Description: `Show a semaphore: its max, units held and free, each permit (index, weight, host, pid) and who waits, in order.`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, tool(s, s.semStatus))
}

// sems returns the semaphores, connecting first if need be.
func (s *Server) sems(ctx context.Context) (*sem.Semaphores, error) {
	c, err := s.connected(ctx)
	if err != nil {
		return nil, err
	}
	if c.Sems == nil {
		return nil, errors.New("this server was started without semaphores")
	}
	return c.Sems, nil
}

// permitHold is a permit the server holds for the agent.
type permitHold struct {
	p       *sem.Permit
	stopped chan struct{}
}

func permitInfoOf(p *sem.Permit) *PermitInfo {
	h := p.Holder()
	return &PermitInfo{Name: p.Name(), Permit: p.ID(), Index: p.Index(), Weight: p.Weight(), Units: p.Units(),
		Fence: p.Fence(), Host: h.Host, PID: h.PID}
}

// keepPermit starts watching a held permit for its end.
func (s *Server) keepPermit(p *sem.Permit) {
	stopped := make(chan struct{})
	s.mu.Lock()
	s.permitHolds[p.ID()] = &permitHold{p: p, stopped: stopped}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-p.Done():
		case <-stopped:
			return
		}
		s.mu.Lock()
		if h := s.permitHolds[p.ID()]; h == nil || h.p != p {
			s.mu.Unlock()
			return
		}
		delete(s.permitHolds, p.ID())
		lost := LostPermit{Name: p.Name(), Permit: p.ID(), Detail: fmt.Sprint(p.Err())}
		s.lostPermits = append(s.lostPermits, lost)
		s.mu.Unlock()
		s.report(fmt.Sprintf("%s; the agent must stop using what semaphore %s guards", lost.Detail, lost.Name),
			map[string]any{"event": "permit_lost", "name": lost.Name, "permit": lost.Permit, "message": lost.Detail})
	}()
}

// releasePermitID releases a held permit.
func (s *Server) releasePermitID(ctx context.Context, id string) error {
	s.mu.Lock()
	h := s.permitHolds[id]
	delete(s.permitHolds, id)
	s.mu.Unlock()
	if h == nil {
		return fmt.Errorf("%w: permit %s", ErrNotHeld, id)
	}
	close(h.stopped)
	err := h.p.Release(ctx)
	if err == nil || errors.Is(err, sem.ErrLost) {
		return nil
	}
	s.retryInBackground(h.p.TTL(), h.p.Release)
	return fmt.Errorf("%w: %w", ErrClosePending, err)
}

// heldPermits are the ids of the permits held, sorted.
func (s *Server) heldPermits() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.permitHolds))
	for id := range s.permitHolds {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (s *Server) acquirePermit(ctx context.Context, _ *mcp.CallToolRequest, in AcquirePermitInput) (*mcp.CallToolResult, AcquirePermitOutput, error) {
	lost := s.drainLost()
	out := AcquirePermitOutput{Lost: lost}
	if in.WaitSeconds < 0 || in.WaitSeconds > 300 {
		out.Reason = "invalid"
		return withLost(refusal("invalid arguments: wait_seconds %g: want 0 to 300", in.WaitSeconds), lost), out, nil
	}
	ss, err := s.sems(ctx)
	if err != nil {
		out.Reason = "unavailable"
		return withLost(unavailable("acquire permit of "+in.Name, err), lost), out, nil
	}
	opts := []sem.AcquireOption{sem.WithMeta(in.Meta)}
	if in.Weight != 0 {
		opts = append(opts, sem.WithWeight(in.Weight))
	}
	if in.TTLSeconds != 0 {
		opts = append(opts, sem.WithTTL(time.Duration(in.TTLSeconds)*time.Second))
	}
	var p *sem.Permit
	if in.WaitSeconds > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(in.WaitSeconds*float64(time.Second)))
		p, err = ss.Acquire(wctx, in.Name, opts...)
		cancel()
	} else {
		p, err = ss.TryAcquire(ctx, in.Name, opts...)
	}
	var full *sem.FullError
	switch {
	case errors.As(err, &full):
		out.Reason, out.Free, out.Waiting = "full", max(full.Free, 0), full.Waiting
		return withLost(refusal("semaphore %s has no room for you now (%s): do not use what it guards; call acquire_permit again with wait_seconds to wait your turn",
			in.Name, err), lost), out, nil
	case errors.Is(err, sem.ErrNotFound):
		out.Reason = "not_found"
		return withLost(refusal("no semaphore %s: ask an operator to make it (baton sem create %s --max N)", in.Name, in.Name), lost), out, nil
	case errors.Is(err, sem.ErrInvalid):
		out.Reason = "invalid"
		return withLost(refusal("invalid arguments: %v", err), lost), out, nil
	case err != nil:
		out.Reason = "unavailable"
		return withLost(unavailable("acquire permit of "+in.Name, err), lost), out, nil
	}
	s.keepPermit(p)
	out.Acquired, out.Permit = true, permitInfoOf(p)
	return summary(lost, "acquired a permit of %s: index %d, weight %d, fence %d, permit %s; it is renewed for you until release_permit",
		in.Name, p.Index(), p.Weight(), p.Fence(), p.ID()), out, nil
}

func (s *Server) releasePermit(ctx context.Context, _ *mcp.CallToolRequest, in ReleasePermitInput) (*mcp.CallToolResult, ReleasePermitOutput, error) {
	lost := s.drainLost()
	out := ReleasePermitOutput{Permit: in.Permit, Lost: lost}
	err := s.releasePermitID(ctx, in.Permit)
	switch {
	case errors.Is(err, ErrNotHeld):
		return withLost(refusal("not held: you do not hold permit %s through this server; nothing to release", in.Permit), lost), out, nil
	case errors.Is(err, ErrClosePending):
		return withLost(refusal("the baton server did not answer (%v): the permit is yours no more and baton keeps trying to release it, or it expires by its TTL", err), lost), out, nil
	case err != nil:
		return withLost(unavailable("release permit "+in.Permit, err), lost), out, nil
	}
	out.Released = true
	return summary(lost, "released permit %s", in.Permit), out, nil
}

func (s *Server) semStatus(ctx context.Context, _ *mcp.CallToolRequest, in SemStatusInput) (*mcp.CallToolResult, SemStatusOutput, error) {
	lost := s.drainLost()
	out := SemStatusOutput{Lost: lost}
	ss, err := s.sems(ctx)
	if err != nil {
		return withLost(unavailable("sem status "+in.Name, err), lost), out, nil
	}
	st, err := ss.Status(ctx, in.Name)
	switch {
	case errors.Is(err, sem.ErrNotFound):
		return withLost(refusal("no semaphore %s", in.Name), lost), out, nil
	case errors.Is(err, sem.ErrInvalid):
		return withLost(refusal("invalid arguments: %v", err), lost), out, nil
	case err != nil:
		return withLost(unavailable("sem status "+in.Name, err), lost), out, nil
	}
	out.Status = &st
	return summary(lost, "%s: %d of %d units held, %d free, %d waiting", st.Name, st.Held, st.Max, st.Free, len(st.Waiters)), out, nil
}
