package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
)

// Option configures a Server.
type Option func(*config) error

type config struct {
	agent        hostlocal.Process
	watchAgent   bool
	version      string
	closeTimeout time.Duration
	log          io.Writer // nil: none
}

// agentCheck is how often Serve checks that the agent process is alive.
const agentCheck = time.Second

// WithAgentProcess records p as the holder of every slot the server claims
// (`baton mcp` passes its parent: the agent), and makes Serve end, as on a
// disconnect, within a second of p's exit. Default: the calling process,
// not watched.
func WithAgentProcess(p hostlocal.Process) Option {
	return func(c *config) error {
		if p.PID <= 0 {
			return fmt.Errorf("%w: agent pid %d", ErrInvalid, p.PID)
		}
		c.agent, c.watchAgent = p, true
		return nil
	}
}

// WithLog makes the server write a line to w for each slot it loses: the
// way MCP now recommends a stdio server report events (`baton mcp` passes
// stderr). Default: none.
func WithLog(w io.Writer) Option { return func(c *config) error { c.log = w; return nil } }

// WithVersion is the version the server gives in its implementation info.
func WithVersion(v string) Option { return func(c *config) error { c.version = v; return nil } }

// WithCloseTimeout bounds each close of a held slot when the client goes
// away. Default: 5s.
func WithCloseTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: close timeout %s must be positive", ErrInvalid, d)
		}
		c.closeTimeout = d
		return nil
	}
}

// Conn is what the server serves: baton's sessions, leases and queues of
// one prefix and host. Leases and Queues may be nil; their tools then say
// so.
type Conn struct {
	Sessions *session.Manager
	Leases   *lease.Leases
	Queues   *queue.Queues
	Sems     *sem.Semaphores
	Limiters *rate.Limiters
	Spaces   *reserve.Spaces
}

// Server is an MCP server of baton's tools for one agent. Serve it once.
type Server struct {
	connect func(context.Context) (*Conn, error)
	cfg     config
	srv     *mcp.Server

	connMu sync.Mutex // serialises connecting
	conn   *Conn
	group  *session.KeepGroup // the held slots' one watch, made with conn

	mu          sync.Mutex
	held        map[string]*hold
	leaseHolds  map[string]*leaseHold
	permitHolds map[string]*permitHold
	resvHolds   map[string]*resvHold
	lost        []LostSlot   // slot losses not yet reported in a tool result
	lostLeases  []LostLease  // lease losses likewise
	lostPermits []LostPermit // permit losses likewise
	lostResvs   []LostReservation
	ss          *mcp.ServerSession
	wg          sync.WaitGroup // the loss watchers and background closes
	feed        statusFeed
	// recent are slots lost and already reported, so that a heartbeat of
	// one says it was lost rather than "not held"; a claim clears it.
	recent map[string]LostSlot

	// life ends when Serve stops: calls still running end with it.
	life    context.Context
	endLife context.CancelFunc
}

// hold is a slot the server holds for the agent.
type hold struct {
	kp      *session.Keeper
	stopped chan struct{} // closed when the server lets the slot go
}

// New returns a server of what connect returns. connect is called on the
// first tool call that needs the baton server, and again on later calls
// while it fails (the server unreachable), so the MCP server starts, and
// answers, without it.
func New(connect func(context.Context) (*Conn, error), opts ...Option) (*Server, error) {
	cfg := config{version: "dev", closeTimeout: 5 * time.Second}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.agent.PID == 0 {
		p, err := hostlocal.Self()
		if err != nil {
			return nil, fmt.Errorf("mcpserver: this process: %w", err)
		}
		cfg.agent = p
	}
	s := &Server{connect: connect, cfg: cfg, held: map[string]*hold{}, leaseHolds: map[string]*leaseHold{}, permitHolds: map[string]*permitHold{}, resvHolds: map[string]*resvHold{}, recent: map[string]LostSlot{}}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "baton", Title: "baton: slots, leases and queues for agent fleets", Version: cfg.version},
		&mcp.ServerOptions{Instructions: instructions, SubscribeHandler: s.subscribe, UnsubscribeHandler: s.unsubscribe})
	s.addTools()
	s.addLeaseTools()
	s.addPermitTools()
	s.addRateTools()
	s.addReserveTools()
	s.addInspectTools()
	s.addStatusResource()
	return s, nil
}

// instructions tell the model how the tools fit together.
const instructions = `baton keeps agents from stepping on each other: one holder per slot, across hosts.
Before working on something shared (a repository, a branch, a deploy target), call claim_slot with a slot name and your task id.
If it is refused, another agent holds the slot: do not work on it; call claim_slot again later, or with wait_seconds to wait your turn in line.
While you hold a slot this server renews it for you; call heartbeat now and then with a short progress message.
When done, call release_slot with result success or fail. If a result lists lost_slots, stop working on those slots at once.
acquire_lease / release_lease guard short exclusive actions the same way; acquire_permit / release_permit take a place in a shared pool only so many may use at once (a test database, a GPU) and give you an index to pick your copy by; reserve_paths / release_paths reserve the files of a repository you will edit (call it before editing; if refused, do not edit those files), check_paths says whether files are reserved by others; take_rate asks a shared rate limiter (an LLM provider's requests and tokens a minute) for room before a call it limits; leader says who leads a baton lead election; who_holds, list_sessions, doctor and the baton://status resource show the state; queue_add, queue_status and queue_get use work queues.`

// Serve runs the server on t until the client disconnects, the agent
// process exits (WithAgentProcess) or ctx is done: each is a normal stop.
// Calls still running are then cancelled, and every slot the server holds
// is closed with result "fail" and every lease released. It returns the
// errors of those closes (nil when all were closed or already gone).
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	defer s.endLife()
	ss, err := s.srv.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcpserver: connect: %w", err)
	}
	s.mu.Lock()
	s.ss = ss
	s.mu.Unlock()
	waited := make(chan struct{})
	go func() { _ = ss.Wait(); close(waited) }()
	var agentGone <-chan time.Time
	if s.cfg.watchAgent {
		tick := time.NewTicker(agentCheck)
		defer tick.Stop()
		agentGone = tick.C
	}
wait:
	for {
		select {
		case <-waited:
			break wait
		case <-agentGone:
			if s.cfg.agent.Alive() {
				continue
			}
			// The agent is gone, whoever holds our stdio: end as on a
			// disconnect.
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	// Calls still running (a claim waiting for the gate, a lease wait)
	// end now, so that closing the session does not wait for them.
	s.endLife()
	_ = ss.Close()
	<-waited
	s.stopFeed()
	err = s.releaseAll(session.ResultFail)
	s.wg.Wait()
	s.connMu.Lock()
	g := s.group
	s.connMu.Unlock()
	if g != nil {
		g.Close()
	}
	return err
}

// bound ties a call's ctx to the server's life.
func (s *Server) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// tool is a tool handler whose ctx ends with the server's life.
func tool[In, Out any](s *Server, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		ctx, done := s.bound(ctx)
		defer done()
		return h(ctx, req, in)
	}
}

// releaseAll closes every held slot with result and releases every held
// lease.
func (s *Server) releaseAll(result string) error {
	s.mu.Lock()
	slots := make([]string, 0, len(s.held))
	for slot := range s.held {
		slots = append(slots, slot)
	}
	keys := make([]string, 0, len(s.leaseHolds))
	for key := range s.leaseHolds {
		keys = append(keys, key)
	}
	s.mu.Unlock()
	sort.Strings(slots)
	sort.Strings(keys)
	var errs []error
	for _, slot := range slots {
		if _, err := s.release(slot, result); err != nil && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	for _, key := range keys {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.closeTimeout)
		err := s.releaseLeaseKey(ctx, key)
		cancel()
		if err != nil && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	for _, id := range s.heldPermits() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.closeTimeout)
		err := s.releasePermitID(ctx, id)
		cancel()
		if err != nil && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	for _, id := range s.heldReservations() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.closeTimeout)
		err := s.releaseResvID(ctx, id)
		cancel()
		if err != nil && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// connected returns the connection, connecting first if need be.
func (s *Server) connected(ctx context.Context) (*Conn, error) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.conn != nil {
		return s.conn, nil
	}
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	if c == nil || c.Sessions == nil {
		return nil, fmt.Errorf("mcpserver: connect returned no session manager")
	}
	s.conn, s.group = c, c.Sessions.KeepGroup()
	return c, nil
}

// manager returns the session manager, connecting first if need be.
func (s *Server) manager(ctx context.Context) (*session.Manager, error) {
	c, err := s.connected(ctx)
	if err != nil {
		return nil, err
	}
	return c.Sessions, nil
}

// keep starts holding s and watching for its loss (one watch for all the
// slots the server holds).
func (s *Server) keep(sess *session.Session, sent time.Time) *hold {
	s.connMu.Lock()
	g := s.group
	s.connMu.Unlock()
	h := &hold{kp: g.Keep(sess, sent, sess.TTL/10), stopped: make(chan struct{})}
	s.mu.Lock()
	s.held[sess.Slot] = h
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case err := <-h.kp.Lost():
			s.onLost(sess.Slot, h, err)
		case <-h.stopped:
		}
	}()
	return h
}

// take removes slot's hold, if it is h (nil: whichever), and returns it.
func (s *Server) take(slot string, h *hold) *hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.held[slot]
	if cur == nil || h != nil && cur != h {
		return nil
	}
	delete(s.held, slot)
	return cur
}

// holdOf returns the hold of slot, or nil.
func (s *Server) holdOf(slot string) *hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[slot]
}

// release closes slot with result. When the server cannot be reached, it
// goes on trying in the background (until the session's TTL has run out,
// or the server stops) and returns ErrClosePending with the error.
func (s *Server) release(slot, result string) (*session.Session, error) {
	h := s.take(slot, nil)
	if h == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotHeld, slot)
	}
	close(h.stopped)
	last := h.kp.Session()
	err := h.kp.Close(result, s.cfg.closeTimeout)
	var lost *session.LostError
	if err == nil || errors.As(err, &lost) {
		return last, err
	}
	s.retryInBackground(last.TTL, func(ctx context.Context) error {
		err := h.kp.Close(result, s.cfg.closeTimeout)
		if errors.As(err, &lost) {
			return nil // another session took it: nothing left to close
		}
		return err
	})
	return last, fmt.Errorf("%w: %w", ErrClosePending, err)
}

// retryInBackground calls fn every second until it succeeds, within ends,
// or the server stops.
func (s *Server) retryInBackground(within time.Duration, fn func(context.Context) error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		deadline := time.NewTimer(within)
		defer deadline.Stop()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-s.life.Done():
				return
			case <-deadline.C:
				return
			case <-tick.C:
				if fn(s.life) == nil {
					return
				}
			}
		}
	}()
}

// onLost records a held slot's loss, to report in the next tool result and
// as a logging notification.
func (s *Server) onLost(slot string, h *hold, err error) {
	if s.take(slot, h) == nil {
		return // released meanwhile, or reported already
	}
	close(h.stopped) // the caller took it: its watcher may still wait
	h.kp.Stop()
	ls := LostSlot{Slot: slot, Fence: h.kp.Session().Fence, Detail: err.Error()}
	var lost *session.LostError
	if errors.As(err, &lost) {
		ls.How = lost.How
		if lost.How == session.LostUnrenewed {
			// The server may come back before it expires the session: free
			// the slot then rather than leave it to the TTL.
			_ = h.kp.Close(session.ResultFail, time.Second)
		}
	}
	s.mu.Lock()
	s.lost = append(s.lost, ls)
	s.recent[slot] = ls
	s.mu.Unlock()
	s.report(fmt.Sprintf("%s; the agent must stop working on slot %s", ls.Detail, slot),
		map[string]any{"event": "slot_lost", "slot": ls.Slot, "fence": ls.Fence, "how": ls.How, "message": ls.Detail + "; stop working on the slot"})
}

// report tells of a loss on the log (stderr) and as a logging notification.
func (s *Server) report(line string, data map[string]any) {
	if s.cfg.log != nil {
		fmt.Fprintf(s.cfg.log, "baton: mcp: %s\n", line)
	}
	s.mu.Lock()
	ss := s.ss
	s.mu.Unlock()
	if ss == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// Logging notifications are deprecated as of MCP 2026-07-28 (SEP-2577)
	// but still served to clients that set a level; the next tool result
	// and the log line say it too.
	//lint:ignore SA1019 kept for clients of earlier protocol versions (ADR 0027)
	_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "baton", Data: data})
}

// drainLost returns the losses not yet reported, and forgets them.
func (s *Server) drainLost() Lost {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Lost{LostSlots: s.lost, LostLeases: s.lostLeases, LostPermits: s.lostPermits, LostReservations: s.lostResvs}
	s.lost, s.lostLeases, s.lostPermits, s.lostResvs = nil, nil, nil, nil
	return out
}
