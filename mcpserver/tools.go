package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// SessionInfo is a session as the tools show it: the fields of
// `baton status --json` rows.
type SessionInfo struct {
	Slot      string            `json:"slot" jsonschema:"the slot's name"`
	TaskID    string            `json:"task_id" jsonschema:"the task the slot was taken for"`
	AgentID   string            `json:"agent_id,omitempty" jsonschema:"the agent that took it"`
	Host      string            `json:"host" jsonschema:"the host of the holder"`
	PID       int               `json:"pid" jsonschema:"the holder's process on that host"`
	Fence     uint64            `json:"fence" jsonschema:"grows with every new holder of the slot: pass it to whatever you write, so a stale holder can be refused"`
	Revision  uint64            `json:"revision" jsonschema:"the record's revision"`
	StartedAt time.Time         `json:"started_at" jsonschema:"when the session began (holder's clock)"`
	RenewedAt time.Time         `json:"renewed_at" jsonschema:"when it was last renewed (holder's clock)"`
	Renewals  uint64            `json:"renewals" jsonschema:"how many times it was renewed"`
	Message   string            `json:"message,omitempty" jsonschema:"the last progress message"`
	Meta      map[string]string `json:"meta,omitempty" jsonschema:"key-value pairs recorded with the session"`
	TTLMS     int64             `json:"ttl_ms" jsonschema:"the session's lifetime without a renewal, in milliseconds"`
	AgeMS     *int64            `json:"age_ms,omitempty" jsonschema:"time since the last renewal on the server's clock, in milliseconds"`
	TTLLeftMS *int64            `json:"ttl_left_ms,omitempty" jsonschema:"time until the server expires it unless renewed, in milliseconds"`
	State     string            `json:"state,omitempty" jsonschema:"live, stale (not renewed for half its TTL) or expiring"`
}

// LostSlot is a slot this server held for the agent and lost.
type LostSlot struct {
	Slot   string `json:"slot" jsonschema:"the slot that was lost"`
	Fence  uint64 `json:"fence" jsonschema:"the fence of the session that was lost"`
	How    string `json:"how,omitempty" jsonschema:"expired, closed, taken over, gone or not renewed in time"`
	Detail string `json:"detail" jsonschema:"what happened"`
}

// Lost is part of every tool's output.
type Lost struct {
	LostSlots   []LostSlot   `json:"lost_slots,omitempty" jsonschema:"slots you held that were lost since the last tool result: stop working on them now"`
	LostLeases  []LostLease  `json:"lost_leases,omitempty" jsonschema:"leases you held that were lost since the last tool result: stop what they guard now"`
	LostPermits []LostPermit `json:"lost_permits,omitempty" jsonschema:"semaphore permits you held that were lost since the last tool result: stop using what they guard now"`
	// LostReservations are path reservations lost likewise.
	LostReservations []LostReservation `json:"lost_reservations,omitempty" jsonschema:"path reservations you held that were lost since the last tool result: stop editing their paths now"`
}

// text is the losses as a tail of a one-line summary.
func (l Lost) text() string {
	var b strings.Builder
	for _, x := range l.LostSlots {
		fmt.Fprintf(&b, "; LOST slot %s (%s): stop working on it", x.Slot, x.How)
	}
	for _, x := range l.LostPermits {
		fmt.Fprintf(&b, "; LOST permit %s of %s: stop using what it guards", x.Permit, x.Name)
	}
	for _, x := range l.LostReservations {
		fmt.Fprintf(&b, "; LOST reservation %s of %s: stop editing its paths", x.ID, x.Space)
	}
	for _, x := range l.LostLeases {
		fmt.Fprintf(&b, "; LOST lease %s: stop what it guards", x.Key)
	}
	return b.String()
}

func infoOf(s *session.Session) *SessionInfo {
	return &SessionInfo{
		Slot: s.Slot, TaskID: s.TaskID, AgentID: s.AgentID, Host: s.Host, PID: s.PID, Fence: s.Fence,
		Revision: s.Revision, StartedAt: s.StartedAt, RenewedAt: s.RenewedAt, Renewals: s.Renewals,
		Message: s.Message, Meta: s.Meta, TTLMS: s.TTL.Milliseconds(),
	}
}

func rowOf(s *session.Session, now time.Time) *SessionInfo {
	info := infoOf(s)
	t := s.Timing(now, 0)
	age, left := t.Age.Milliseconds(), t.Left.Milliseconds()
	info.AgeMS, info.TTLLeftMS, info.State = &age, &left, string(t.State)
	return info
}

// ClaimInput is claim_slot's arguments.
type ClaimInput struct {
	Slot        string            `json:"slot" jsonschema:"the slot to take: a name for the shared thing you are about to work on (letters, digits, - _ . /)"`
	Task        string            `json:"task" jsonschema:"the id of your task, shown to whoever finds the slot taken"`
	TTLSeconds  int               `json:"ttl_seconds,omitempty" jsonschema:"how long the slot outlives this server if it stops renewing it (crash), in whole seconds; default 900"`
	WaitSeconds float64           `json:"wait_seconds,omitempty" jsonschema:"how long to wait for a held slot, in line behind the agents that began to wait before you (and for another process of this host taking the same slot at this very moment), at most 300; default 0: answer at once"`
	Agent       string            `json:"agent,omitempty" jsonschema:"your agent id; default: the name your MCP client gives"`
	Meta        map[string]string `json:"meta,omitempty" jsonschema:"key-value pairs to record with the session (a branch, a PR, a URL)"`
}

// ClaimOutput is claim_slot's result.
type ClaimOutput struct {
	Claimed bool         `json:"claimed" jsonschema:"true when you now hold the slot"`
	Session *SessionInfo `json:"session,omitempty" jsonschema:"your session, when claimed"`
	Holder  *SessionInfo `json:"holder,omitempty" jsonschema:"who holds the slot, when refused"`
	Reason  string       `json:"reason,omitempty" jsonschema:"why it was refused: held, other_host, busy, undecodable, invalid, unavailable (retry soon) or error (an operator must act)"`
	Lost
}

// HeartbeatInput is heartbeat's arguments.
type HeartbeatInput struct {
	Slot    string `json:"slot" jsonschema:"a slot you hold"`
	Message string `json:"message,omitempty" jsonschema:"a short note of your progress, shown to operators; empty keeps the last"`
}

// HeartbeatOutput is heartbeat's result.
type HeartbeatOutput struct {
	Session *SessionInfo `json:"session,omitempty" jsonschema:"your session after the renewal"`
	Lost
}

// ReleaseInput is release_slot's arguments.
type ReleaseInput struct {
	Slot   string `json:"slot" jsonschema:"a slot you hold"`
	Result string `json:"result,omitempty" jsonschema:"how your work on it ended: success or fail; default success"`
}

// ReleaseOutput is release_slot's result.
type ReleaseOutput struct {
	Released bool   `json:"released" jsonschema:"true when the slot was closed and is free"`
	Slot     string `json:"slot"`
	Result   string `json:"result,omitempty"`
	Lost
}

// WhoInput is who_holds's arguments.
type WhoInput struct {
	Slot string `json:"slot" jsonschema:"the slot to look at"`
}

// WhoOutput is who_holds's result.
type WhoOutput struct {
	Slot   string       `json:"slot"`
	Held   bool         `json:"held" jsonschema:"true when a live session holds the slot"`
	Mine   bool         `json:"mine" jsonschema:"true when you hold it, through this server"`
	Holder *SessionInfo `json:"holder,omitempty" jsonschema:"the session holding it"`
	Lost
}

// ListInput is list_sessions's arguments.
type ListInput struct {
	Host  string `json:"host,omitempty" jsonschema:"only sessions of this host"`
	Agent string `json:"agent,omitempty" jsonschema:"only sessions of this agent id"`
	State string `json:"state,omitempty" jsonschema:"only sessions in this state: live, stale or expiring"`
}

// ListOutput is list_sessions's result.
type ListOutput struct {
	Sessions   []*SessionInfo `json:"sessions" jsonschema:"the sessions, by slot"`
	ServerTime time.Time      `json:"server_time" jsonschema:"the server's clock when they were read"`
	Lost
}

func (s *Server) addTools() {
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:  "claim_slot",
		Title: "Claim a slot",
		Description: `Take a slot (one holder at a time, across hosts) before working on the shared thing it names.
On success you hold it until release_slot; this server renews it for you in the background, and records your process as its holder.
If another agent holds it, the result has isError, reason "held" or "other_host", and names the holder (host, pid, agent, task, since when): do not work on the slot; do something else and call claim_slot again later (who_holds says whether it is free), or call it with wait_seconds to wait your turn in line.
Reason "busy": another process of this host is taking the same slot right now; retry with wait_seconds of 1-5.
Reason "unavailable": the baton server cannot be reached; retry in a few seconds. Reason "error": something an operator must fix (the message says what).
Claiming a slot you already hold returns it again.`,
	}, tool(s, s.claim))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:  "heartbeat",
		Title: "Record progress on a slot",
		Description: `Renew a slot you hold now and record a short progress message operators can see.
The slot is renewed in the background anyway; call this to say what you are doing.
An error "not held" means you do not hold the slot through this server: claim_slot first.
An error "lost" means the slot was taken, closed or expired: stop working on it.`,
	}, tool(s, s.heartbeat))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:  "release_slot",
		Title: "Release a slot",
		Description: `Give up a slot you hold, recording how the work ended (result success or fail), so another agent can take it.
Call it as soon as your work on the slot is done. Slots still held when you disconnect are released with result fail.`,
	}, tool(s, s.releaseTool))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "who_holds",
		Title:       "Who holds a slot",
		Description: `Say whether a slot is held, and by whom (host, pid, agent, task, fence, since), without taking it.`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, tool(s, s.who))
	mcp.AddTool(s.srv, &mcp.Tool{
		Name:        "list_sessions",
		Title:       "List sessions",
		Description: `List the live sessions of every host (slot, holder, task, progress message, time left), optionally only those of one host, one agent or one state (live, stale, expiring).`,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, tool(s, s.list))
}

// refusal is a tool result with isError set and text saying what to do.
func refusal(format string, a ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, a...)}}}
}

// summary is a successful tool result's one line.
func summary(lost Lost, format string, a ...any) *mcp.CallToolResult {
	text := fmt.Sprintf(format, a...) + lost.text()
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// withLost adds the losses not yet reported to a refusal's text.
func withLost(res *mcp.CallToolResult, lost Lost) *mcp.CallToolResult {
	t := res.Content[0].(*mcp.TextContent)
	t.Text += lost.text()
	return res
}

// agentOf is the agent id of a claim: the argument, else the client's name.
func agentOf(req *mcp.CallToolRequest, agent string) string {
	if agent != "" {
		return agent
	}
	if req != nil && req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
			return p.ClientInfo.Name
		}
	}
	return ""
}

func (s *Server) claim(ctx context.Context, req *mcp.CallToolRequest, in ClaimInput) (*mcp.CallToolResult, ClaimOutput, error) {
	lost := s.drainLost()
	out := ClaimOutput{Lost: lost}
	if in.WaitSeconds < 0 || in.WaitSeconds > 300 {
		out.Reason = "invalid"
		return withLost(refusal("invalid arguments: wait_seconds %g: want 0 to 300", in.WaitSeconds), lost), out, nil
	}
	if h := s.holdOf(in.Slot); h != nil {
		out.Claimed, out.Session = true, infoOf(h.kp.Session())
		return summary(lost, "you already hold slot %s (fence %d)", in.Slot, out.Session.Fence), out, nil
	}
	ttl := session.DefaultTTL
	if in.TTLSeconds != 0 {
		ttl = time.Duration(in.TTLSeconds) * time.Second
	}
	opts := []session.JoinOption{
		session.WithTTL(ttl), session.WithAgent(agentOf(req, in.Agent)), session.WithMeta(in.Meta),
		session.WithWait(time.Duration(in.WaitSeconds * float64(time.Second))),
		session.WithProcess(s.cfg.agent), session.WithPurpose("baton mcp claim_slot " + in.Slot),
	}
	m, err := s.manager(ctx)
	if err != nil {
		out.Reason = "unavailable"
		return withLost(unavailable("claim slot "+in.Slot, err), lost), out, nil
	}
	sent := time.Now()
	sess, err := m.Join(ctx, in.Slot, in.Task, opts...)
	if err != nil {
		res, reason, holder := explainJoin(in.Slot, err)
		out.Reason, out.Holder = reason, holder
		return withLost(res, lost), out, nil
	}
	s.keep(sess, sent)
	s.mu.Lock()
	delete(s.recent, in.Slot)
	s.mu.Unlock()
	out.Claimed, out.Session = true, infoOf(sess)
	return summary(lost, "claimed slot %s (fence %d); it is renewed for you until release_slot", sess.Slot, sess.Fence), out, nil
}

// explainJoin turns a join's error into a refusal a model can act on.
func explainJoin(slot string, err error) (*mcp.CallToolResult, string, *SessionInfo) {
	var held *session.HeldError
	var locked *hostlocal.LockedError
	switch {
	case errors.As(err, &held) && held.Holder != nil:
		reason := "held"
		if errors.Is(err, session.ErrForeignHost) {
			reason = "other_host"
		}
		waited := ""
		if held.Waited > 0 {
			waited = fmt.Sprintf(" (still, after waiting %s in line)", held.Waited)
		}
		return refusal("slot %s is held by %s%s: do not work on it; do something else and call claim_slot again later (who_holds says whether it is free), or with wait_seconds to wait your turn",
			slot, holderText(held.Holder), waited), reason, infoOf(held.Holder)
	case errors.As(err, &held):
		return refusal("slot %s holds a record baton cannot read, so it is treated as held: ask an operator to run `baton doctor`; %v", slot, err), "undecodable", nil
	case errors.Is(err, session.ErrGateBusy):
		who := "another process"
		if errors.As(err, &locked) && locked.Holder != nil && locked.Holder.PID > 0 {
			who = fmt.Sprintf("pid %d", locked.Holder.PID)
		}
		return refusal("another process of this host (%s) is taking slot %s right now: call claim_slot again with wait_seconds of 1-5", who, slot), "busy", nil
	case errors.Is(err, session.ErrInvalid):
		return refusal("invalid arguments: %v", err), "invalid", nil
	default:
		res := unavailable("claim slot "+slot, err)
		if transientErr(err) {
			return res, "unavailable", nil
		}
		return res, "error", nil
	}
}

// transientErr reports an error a retry may cure: no answer in time.
func transientErr(err error) bool {
	return errors.Is(err, kv.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// unavailable is the refusal of a call the baton server did not answer,
// or answered with an error a retry will not cure.
func unavailable(what string, err error) *mcp.CallToolResult {
	switch {
	case errors.Is(err, kv.ErrPermission):
		return refusal("%s: the baton server refused this user (%v): retrying will not help; tell an operator to grant the permissions baton needs", what, err)
	case errors.Is(err, kv.ErrBucketNotFound), errors.Is(err, kv.ErrJetStreamDisabled):
		return refusal("%s: baton's storage is not set up on the server (%v): retrying will not help; tell an operator to run `baton doctor --fix`", what, err)
	case transientErr(err):
		return refusal("%s: the baton server did not answer (%v); nothing changed that you can count on: try again in a few seconds", what, err)
	default:
		return refusal("%s: %v", what, err)
	}
}

// holderText names a holder for a model: host, pid, agent, task, since.
func holderText(h *session.Session) string {
	parts := []string{"host " + h.Host, fmt.Sprintf("pid %d", h.PID)}
	if h.AgentID != "" {
		parts = append(parts, "agent "+h.AgentID)
	}
	if h.TaskID != "" {
		parts = append(parts, "task "+h.TaskID)
	}
	if !h.StartedAt.IsZero() {
		// The holder's clock: informational, as the record says.
		age := time.Since(h.StartedAt).Round(time.Second)
		parts = append(parts, fmt.Sprintf("since %s (for about %s)", h.StartedAt.UTC().Format(time.RFC3339), max(age, 0)))
	}
	if h.Message != "" {
		parts = append(parts, fmt.Sprintf("last message %q", h.Message))
	}
	return strings.Join(parts, ", ")
}

func (s *Server) heartbeat(ctx context.Context, _ *mcp.CallToolRequest, in HeartbeatInput) (*mcp.CallToolResult, HeartbeatOutput, error) {
	lost := s.drainLost()
	out := HeartbeatOutput{Lost: lost}
	h := s.holdOf(in.Slot)
	if h == nil {
		s.mu.Lock()
		gone, wasLost := s.recent[in.Slot]
		s.mu.Unlock()
		if wasLost {
			return withLost(refusal("lost: you lost slot %s earlier (%s); stop working on it; claim it again only if your task needs it anew", in.Slot, gone.Detail), lost), out, nil
		}
		return withLost(refusal("not held: you do not hold slot %s through this server; claim_slot first", in.Slot), lost), out, nil
	}
	next, err := h.kp.Commit(ctx, in.Message)
	var gone *session.LostError
	switch {
	case errors.As(err, &gone):
		s.onLost(in.Slot, h, err)
		more := s.drainLost()
		out.LostSlots = append(out.LostSlots, more.LostSlots...)
		out.LostLeases = append(out.LostLeases, more.LostLeases...)
		var others Lost
		for _, l := range out.LostSlots {
			if l.Slot != in.Slot {
				others.LostSlots = append(others.LostSlots, l)
			}
		}
		others.LostLeases = out.LostLeases
		return withLost(refusal("lost: %v; stop working on slot %s", err, in.Slot), others), out, nil
	case errors.Is(err, session.ErrInvalid):
		return withLost(refusal("invalid arguments: %v", err), lost), out, nil
	case err != nil:
		return withLost(unavailable("heartbeat "+in.Slot, err), lost), out, nil
	}
	out.Session = infoOf(next)
	return summary(lost, "renewed slot %s (renewal %d)", in.Slot, next.Renewals), out, nil
}

func (s *Server) releaseTool(_ context.Context, _ *mcp.CallToolRequest, in ReleaseInput) (*mcp.CallToolResult, ReleaseOutput, error) {
	lost := s.drainLost()
	result := in.Result
	if result == "" {
		result = session.ResultSuccess
	}
	out := ReleaseOutput{Slot: in.Slot, Result: result, Lost: lost}
	if result != session.ResultSuccess && result != session.ResultFail {
		return withLost(refusal("invalid arguments: result %q: want success or fail", result), lost), out, nil
	}
	_, err := s.release(in.Slot, result)
	var gone *session.LostError
	switch {
	case errors.Is(err, ErrNotHeld):
		return withLost(refusal("not held: you do not hold slot %s through this server; nothing to release", in.Slot), lost), out, nil
	case errors.As(err, &gone):
		return withLost(refusal("slot %s was no longer yours (%v); it was left to its new holder", in.Slot, err), lost), out, nil
	case errors.Is(err, ErrClosePending):
		return withLost(refusal("the baton server did not answer (%v): the slot is yours no more and baton keeps trying to close it, or it expires by its TTL; do not work on it", err), lost), out, nil
	case err != nil:
		return withLost(unavailable("release "+in.Slot, err), lost), out, nil
	}
	out.Released = true
	return summary(lost, "released slot %s (%s)", in.Slot, result), out, nil
}

func (s *Server) who(ctx context.Context, _ *mcp.CallToolRequest, in WhoInput) (*mcp.CallToolResult, WhoOutput, error) {
	lost := s.drainLost()
	out := WhoOutput{Slot: in.Slot, Lost: lost}
	m, err := s.manager(ctx)
	if err != nil {
		return withLost(unavailable("who holds "+in.Slot, err), lost), out, nil
	}
	cur, err := m.Get(ctx, in.Slot)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return summary(lost, "slot %s is free", in.Slot), out, nil
	case errors.Is(err, session.ErrInvalid):
		return withLost(refusal("invalid arguments: %v", err), lost), out, nil
	case err != nil:
		return withLost(unavailable("who holds "+in.Slot, err), lost), out, nil
	}
	out.Held, out.Holder = true, infoOf(cur)
	if h := s.holdOf(in.Slot); h != nil && h.kp.Session().Fence == cur.Fence {
		out.Mine = true
		return summary(lost, "slot %s is held by you (fence %d)", in.Slot, cur.Fence), out, nil
	}
	return summary(lost, "slot %s is held by %s", in.Slot, holderText(cur)), out, nil
}

func (s *Server) list(ctx context.Context, _ *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListOutput, error) {
	lost := s.drainLost()
	out := ListOutput{Sessions: []*SessionInfo{}, Lost: lost}
	switch in.State {
	case "", string(session.StateLive), string(session.StateStale), string(session.StateExpiring):
	default:
		return withLost(refusal("invalid arguments: state %q: want live, stale or expiring", in.State), lost), out, nil
	}
	m, err := s.manager(ctx)
	if err != nil {
		return withLost(unavailable("list sessions", err), lost), out, nil
	}
	l, err := m.List(ctx)
	if err != nil {
		return withLost(unavailable("list sessions", err), lost), out, nil
	}
	out.ServerTime = l.ServerTime
	for _, sess := range l.Sessions {
		row := rowOf(sess, l.ServerTime)
		if in.Host != "" && row.Host != in.Host || in.Agent != "" && row.AgentID != in.Agent || in.State != "" && row.State != in.State {
			continue
		}
		out.Sessions = append(out.Sessions, row)
	}
	return summary(lost, "%d sessions", len(out.Sessions)), out, nil
}
