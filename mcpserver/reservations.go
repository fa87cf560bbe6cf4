package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/reserve"
)

// ReservationInfo is a path reservation as the tools show it.
type ReservationInfo struct {
	Space    string   `json:"space"`
	ID       string   `json:"id" jsonschema:"the reservation's id: pass it to release_paths"`
	Patterns []string `json:"patterns"`
	Shared   bool     `json:"shared"`
	Fence    uint64   `json:"fence" jsonschema:"grows with every new reservation of the space: pass it to whatever you write"`
}

// PathConflict is a reservation in the way of a request or a check.
type PathConflict struct {
	Pattern    string  `json:"pattern" jsonschema:"your pattern or path in the way"`
	Theirs     string  `json:"theirs" jsonschema:"the holder's pattern it overlaps"`
	Mode       string  `json:"mode" jsonschema:"exclusive or shared: the holder's"`
	Waiting    bool    `json:"waiting,omitempty" jsonschema:"true when the holder waits in line before you, not yet holding"`
	Agent      string  `json:"agent,omitempty"`
	Task       string  `json:"task,omitempty"`
	Host       string  `json:"host"`
	PID        int     `json:"pid"`
	AgeSeconds float64 `json:"age_seconds" jsonschema:"how long it has been held"`
}

// LostReservation is a reservation this server held for the agent and lost.
type LostReservation struct {
	Space  string `json:"space"`
	ID     string `json:"id"`
	Detail string `json:"detail" jsonschema:"what happened"`
}

// ReservePathsInput is reserve_paths's arguments.
type ReservePathsInput struct {
	Space       string            `json:"space" jsonschema:"the reservation space: the repository's id, as the fleet names it (github.com/org/repo)"`
	Patterns    []string          `json:"patterns" jsonschema:"the files and directories you will edit, relative to the repository root: plain paths, or globs with * (within a directory), ? and ** (any depth); a directory covers everything beneath it"`
	Shared      bool              `json:"shared,omitempty" jsonschema:"true to reserve for reading or for edits others may share: only exclusive reservations are then in your way, and yours blocks only exclusive ones"`
	Task        string            `json:"task,omitempty" jsonschema:"your task id, shown to anyone your reservation is in the way of"`
	Agent       string            `json:"agent,omitempty" jsonschema:"your agent id; default: your client's name"`
	TTLSeconds  int               `json:"ttl_seconds,omitempty" jsonschema:"how long the reservation outlives this server if it stops renewing it, in whole seconds; default 30"`
	WaitSeconds float64           `json:"wait_seconds,omitempty" jsonschema:"how long to wait in line for the paths, at most 300; default 0: answer at once"`
	Meta        map[string]string `json:"meta,omitempty" jsonschema:"key-value pairs to record with the reservation"`
}

// ReservePathsOutput is reserve_paths's result.
type ReservePathsOutput struct {
	Reserved    bool             `json:"reserved" jsonschema:"true when you now hold every pattern; false: you hold none of them"`
	Reservation *ReservationInfo `json:"reservation,omitempty"`
	Conflicts   []PathConflict   `json:"conflicts,omitempty" jsonschema:"who holds what you asked for, when refused"`
	Reason      string           `json:"reason,omitempty" jsonschema:"why it was refused: held, invalid or unavailable"`
	Lost
}

// ReleasePathsInput is release_paths's arguments.
type ReleasePathsInput struct {
	ID string `json:"id,omitempty" jsonschema:"the id of a reservation you hold, as reserve_paths gave it; empty: every reservation you hold"`
}

// ReleasePathsOutput is release_paths's result.
type ReleasePathsOutput struct {
	Released []string `json:"released" jsonschema:"the ids released"`
	Lost
}

// CheckPathsInput is check_paths's arguments.
type CheckPathsInput struct {
	Space      string   `json:"space" jsonschema:"the reservation space"`
	Paths      []string `json:"paths" jsonschema:"files or directories, relative to the repository root, taken literally"`
	ForReading bool     `json:"for_reading,omitempty" jsonschema:"true to check for reading: only others' exclusive reservations are then in the way"`
}

// CheckPathsOutput is check_paths's result.
type CheckPathsOutput struct {
	Free      bool           `json:"free" jsonschema:"true when no one else holds any of the paths"`
	Conflicts []PathConflict `json:"conflicts,omitempty"`
	Lost
}

// ListReservationsInput is list_reservations's arguments.
type ListReservationsInput struct {
	Space string `json:"space" jsonschema:"the reservation space"`
}

// ReservationRow is one reservation of a space as list_reservations shows it.
type ReservationRow struct {
	ID             string   `json:"id"`
	State          string   `json:"state" jsonschema:"held, waiting (in line, holding nothing yet) or expired"`
	Patterns       []string `json:"patterns"`
	Shared         bool     `json:"shared"`
	Agent          string   `json:"agent,omitempty"`
	Task           string   `json:"task,omitempty"`
	Host           string   `json:"host"`
	PID            int      `json:"pid"`
	Fence          uint64   `json:"fence,omitempty"`
	AgeSeconds     float64  `json:"age_seconds"`
	TTLLeftSeconds float64  `json:"ttl_left_seconds"`
	Yours          bool     `json:"yours,omitempty" jsonschema:"true for a reservation held through this server"`
}

// ListReservationsOutput is list_reservations's result.
type ListReservationsOutput struct {
	Space        string           `json:"space"`
	Reservations []ReservationRow `json:"reservations"`
	Lost
}

func (s *Server) addReserveTools() {
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:  "reserve_paths",
		Title: "Reserve the files you will edit",
		Description: `Reserve files and directories of a repository before you edit them, so that no other agent edits them at the same time: all the patterns you give, or none.
Call it before your first edit of a file, with every path or glob you expect to touch (src/parser/**, docs/api.md). This server renews the reservation for you until release_paths.
If the result has isError and reason "held", other agents hold some of the paths: do not edit any of them; the conflicts say who holds which (agent, task, pattern, for how long). Work on other files, or call reserve_paths again with wait_seconds to wait your turn in line, or ask the holder.`,
	}, tool(s, s.reservePaths))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "release_paths",
		Title:       "Release reserved files",
		Description: `Release a reservation as soon as you are done editing (your changes committed or abandoned), so that the next agent in line gets the paths. Without an id, releases every reservation you hold. Reservations still held when you disconnect are released.`,
	}, tool(s, s.releasePaths))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "check_paths",
		Title:       "Check whether files are reserved by others",
		Description: `Say whether any of the given paths is reserved by another agent (your own reservations never count). Call it before editing or committing files you did not reserve; if free is false, do not edit them: reserve what you need with reserve_paths, or leave them.`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, tool(s, s.checkPaths))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "list_reservations",
		Title:       "List a repository's reservations",
		Description: `Show every reservation of a space: patterns, shared or exclusive, holder (agent, task, host, pid), how long held and how long left, and who waits in line.`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, tool(s, s.listReservations))
}

// spaces returns the reservation spaces, connecting first if need be.
func (s *Server) spaces(ctx context.Context) (*reserve.Spaces, error) {
	c, err := s.connected(ctx)
	if err != nil {
		return nil, err
	}
	if c.Spaces == nil {
		return nil, errors.New("this server was started without path reservations")
	}
	return c.Spaces, nil
}

// resvHold is a reservation the server holds for the agent.
type resvHold struct {
	r       *reserve.Reservation
	stopped chan struct{}
}

func resvInfoOf(r *reserve.Reservation) *ReservationInfo {
	e := r.Entry()
	return &ReservationInfo{Space: r.Space(), ID: r.ID(), Patterns: e.Patterns, Shared: e.Shared, Fence: r.Fence()}
}

func conflictsOf(cs []reserve.Conflict) []PathConflict {
	out := make([]PathConflict, 0, len(cs))
	for _, c := range cs {
		mode := "exclusive"
		if c.Holder.Shared {
			mode = "shared"
		}
		out = append(out, PathConflict{Pattern: c.Pattern, Theirs: c.Theirs, Mode: mode, Waiting: c.Holder.Waiting, Agent: c.Holder.Agent,
			Task: c.Holder.Task, Host: c.Holder.Host, PID: c.Holder.PID, AgeSeconds: c.Age.Seconds()})
	}
	return out
}

// keepReservation starts watching a held reservation for its end.
func (s *Server) keepReservation(r *reserve.Reservation) {
	stopped := make(chan struct{})
	s.mu.Lock()
	s.resvHolds[r.ID()] = &resvHold{r: r, stopped: stopped}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-r.Done():
		case <-stopped:
			return
		}
		s.mu.Lock()
		if h := s.resvHolds[r.ID()]; h == nil || h.r != r {
			s.mu.Unlock()
			return
		}
		delete(s.resvHolds, r.ID())
		lost := LostReservation{Space: r.Space(), ID: r.ID(), Detail: fmt.Sprint(r.Err())}
		s.lostResvs = append(s.lostResvs, lost)
		s.mu.Unlock()
		s.report(fmt.Sprintf("%s; the agent must stop editing the paths of reservation %s", lost.Detail, lost.ID),
			map[string]any{"event": "reservation_lost", "space": lost.Space, "id": lost.ID, "message": lost.Detail})
	}()
}

// releaseResvID releases a held reservation.
func (s *Server) releaseResvID(ctx context.Context, id string) error {
	s.mu.Lock()
	h := s.resvHolds[id]
	delete(s.resvHolds, id)
	s.mu.Unlock()
	if h == nil {
		return fmt.Errorf("%w: reservation %s", ErrNotHeld, id)
	}
	close(h.stopped)
	err := h.r.Release(ctx)
	if err == nil || errors.Is(err, reserve.ErrLost) {
		return nil
	}
	s.retryInBackground(h.r.TTL(), h.r.Release)
	return fmt.Errorf("%w: %w", ErrClosePending, err)
}

// heldReservations are the ids of the reservations held, sorted.
func (s *Server) heldReservations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.resvHolds))
	for id := range s.resvHolds {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (s *Server) reservePaths(ctx context.Context, req *mcp.CallToolRequest, in ReservePathsInput) (*mcp.CallToolResult, ReservePathsOutput, error) {
	lost := s.drainLost()
	out := ReservePathsOutput{Lost: lost}
	if in.WaitSeconds < 0 || in.WaitSeconds > 300 {
		out.Reason = "invalid"
		return withLost(refusal("invalid arguments: wait_seconds %g: want 0 to 300", in.WaitSeconds), lost), out, nil
	}
	ss, err := s.spaces(ctx)
	if err != nil {
		out.Reason = "unavailable"
		return withLost(unavailable("reserve paths of "+in.Space, err), lost), out, nil
	}
	opts := []reserve.ReserveOption{reserve.WithMeta(in.Meta), reserve.WithTask(in.Task), reserve.WithAgent(agentOf(req, in.Agent))}
	if in.Shared {
		opts = append(opts, reserve.Shared())
	}
	if in.TTLSeconds != 0 {
		opts = append(opts, reserve.WithTTL(time.Duration(in.TTLSeconds)*time.Second))
	}
	var r *reserve.Reservation
	if in.WaitSeconds > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(in.WaitSeconds*float64(time.Second)))
		r, err = ss.Reserve(wctx, in.Space, in.Patterns, opts...)
		cancel()
	} else {
		r, err = ss.TryReserve(ctx, in.Space, in.Patterns, opts...)
	}
	var held *reserve.HeldError
	switch {
	case errors.As(err, &held):
		out.Reason, out.Conflicts = "held", conflictsOf(held.Conflicts)
		return withLost(refusal("%s: do not edit any of these paths; you hold none of the patterns you asked for. Work on other files, call reserve_paths again with wait_seconds to wait your turn, or ask the holder",
			strings.TrimPrefix(held.Error(), "reserve: ")), lost), out, nil
	case errors.Is(err, reserve.ErrInvalid):
		out.Reason = "invalid"
		return withLost(refusal("invalid arguments: %v", err), lost), out, nil
	case err != nil:
		out.Reason = "unavailable"
		return withLost(unavailable("reserve paths of "+in.Space, err), lost), out, nil
	}
	s.keepReservation(r)
	out.Reserved, out.Reservation = true, resvInfoOf(r)
	mode := "exclusively"
	if in.Shared {
		mode = "shared"
	}
	return summary(lost, "reserved %s in %s %s: fence %d, id %s; it is renewed for you until release_paths",
		strings.Join(r.Patterns(), " "), in.Space, mode, r.Fence(), r.ID()), out, nil
}

func (s *Server) releasePaths(ctx context.Context, _ *mcp.CallToolRequest, in ReleasePathsInput) (*mcp.CallToolResult, ReleasePathsOutput, error) {
	lost := s.drainLost()
	out := ReleasePathsOutput{Released: []string{}, Lost: lost}
	ids := []string{in.ID}
	if in.ID == "" {
		ids = s.heldReservations()
	}
	for _, id := range ids {
		err := s.releaseResvID(ctx, id)
		switch {
		case errors.Is(err, ErrNotHeld):
			return withLost(refusal("not held: you do not hold reservation %s through this server; nothing to release", id), lost), out, nil
		case errors.Is(err, ErrClosePending):
			return withLost(refusal("the baton server did not answer (%v): the reservation is yours no more and baton keeps trying to release it, or it expires by its TTL", err), lost), out, nil
		case err != nil:
			return withLost(unavailable("release reservation "+id, err), lost), out, nil
		}
		out.Released = append(out.Released, id)
	}
	if len(out.Released) == 0 {
		return summary(lost, "you hold no reservations: nothing to release"), out, nil
	}
	return summary(lost, "released %s", strings.Join(out.Released, ", ")), out, nil
}

func (s *Server) checkPaths(ctx context.Context, _ *mcp.CallToolRequest, in CheckPathsInput) (*mcp.CallToolResult, CheckPathsOutput, error) {
	lost := s.drainLost()
	out := CheckPathsOutput{Lost: lost}
	ss, err := s.spaces(ctx)
	if err != nil {
		return withLost(unavailable("check paths of "+in.Space, err), lost), out, nil
	}
	opts := []reserve.CheckOption{reserve.Mine(s.heldReservations()...)}
	if lineage, err := hostlocal.Lineage(s.cfg.agent.PID); err == nil {
		opts = append(opts, reserve.As(lineage))
	}
	if in.ForReading {
		opts = append(opts, reserve.ForReading())
	}
	cs, err := ss.Check(ctx, in.Space, in.Paths, opts...)
	switch {
	case errors.Is(err, reserve.ErrInvalid):
		return withLost(refusal("invalid arguments: %v", err), lost), out, nil
	case err != nil:
		return withLost(unavailable("check paths of "+in.Space, err), lost), out, nil
	}
	out.Free, out.Conflicts = len(cs) == 0, conflictsOf(cs)
	if out.Free {
		return summary(lost, "free: no one else holds any of the %d paths in %s", len(in.Paths), in.Space), out, nil
	}
	he := &reserve.HeldError{Space: in.Space, Conflicts: cs}
	return summary(lost, "NOT free: %s; do not edit these paths", strings.TrimSuffix(strings.TrimPrefix(he.Error(), "reserve: "), "; nothing was reserved")), out, nil
}

func (s *Server) listReservations(ctx context.Context, _ *mcp.CallToolRequest, in ListReservationsInput) (*mcp.CallToolResult, ListReservationsOutput, error) {
	lost := s.drainLost()
	out := ListReservationsOutput{Lost: lost}
	ss, err := s.spaces(ctx)
	if err != nil {
		return withLost(unavailable("list reservations of "+in.Space, err), lost), out, nil
	}
	st, err := ss.Status(ctx, in.Space)
	switch {
	case errors.Is(err, reserve.ErrInvalid):
		return withLost(refusal("invalid arguments: %v", err), lost), out, nil
	case err != nil:
		return withLost(unavailable("list reservations of "+in.Space, err), lost), out, nil
	}
	out.Space, out.Reservations = st.Space, make([]ReservationRow, 0, len(st.Reservations))
	mine := s.heldReservations()
	for _, r := range st.Reservations {
		out.Reservations = append(out.Reservations, ReservationRow{ID: r.ID, State: r.State, Patterns: r.Patterns, Shared: r.Shared,
			Agent: r.Agent, Task: r.Task, Host: r.Host, PID: r.PID, Fence: r.Fence, AgeSeconds: float64(r.AgeMS) / 1000,
			TTLLeftSeconds: float64(r.TTLLeftMS) / 1000, Yours: slices.Contains(mine, r.ID)})
	}
	waiting := len(st.Reservations) - st.Held()
	return summary(lost, "%s: %d reservations held, %d other (waiting or expired)", st.Space, st.Held(), waiting), out, nil
}
