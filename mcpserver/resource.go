package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/view"
)

// StatusURI is the resource of the `baton status --json` document.
const StatusURI = "baton://status"

// statusNotifyEvery is the shortest time between two updated
// notifications of the status resource: changes in between are told once.
const statusNotifyEvery = 500 * time.Millisecond

// statusFeed tells subscribers of the status resource when it changes.
type statusFeed struct {
	mu   sync.Mutex
	stop context.CancelFunc // nil: not watching
	wg   sync.WaitGroup
}

func (s *Server) addStatusResource() {
	s.srv.AddResource(&mcp.Resource{
		URI:         StatusURI,
		Name:        "status",
		Title:       "baton status",
		MIMEType:    "application/json",
		Description: "Every session, lease, leader and queue, as `baton status --json` prints it: holders, fences, ages and time left by the server's clock. Subscribe to be told when it changes.",
	}, s.readStatus)
}

func (s *Server) readStatus(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	c, err := s.connected(ctx)
	if err != nil {
		return nil, unavailableErr(err)
	}
	l, err := c.Sessions.List(ctx)
	if err != nil {
		return nil, unavailableErr(err)
	}
	var leases view.Leases
	if c.Leases != nil {
		ll, err := c.Leases.List(ctx)
		if err != nil {
			return nil, unavailableErr(err)
		}
		leases = view.SplitLeases(ll)
	}
	var sums []queue.Summary
	if c.Queues != nil {
		// A user refused the queues sees the rest, as with baton status.
		if sums, err = c.Queues.Summaries(ctx); err != nil && !errors.Is(err, kv.ErrPermission) {
			return nil, unavailableErr(err)
		}
	}
	doc, err := view.StatusJSON(l, leases, sums, 0)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: StatusURI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// unavailableErr is the error of a resource read the server could not
// answer.
func unavailableErr(err error) error {
	return errors.New("the baton server did not answer (" + err.Error() + "); try again in a few seconds")
}

func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	if req.Params.URI != StatusURI {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	c, err := s.connected(ctx)
	if err != nil {
		return unavailableErr(err)
	}
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	if s.feed.stop != nil {
		return nil
	}
	wctx, stop := context.WithCancel(context.Background())
	sw, err := c.Sessions.Watch(wctx)
	if err != nil {
		stop()
		return unavailableErr(err)
	}
	var lw <-chan lease.Event
	if c.Leases != nil {
		if lw, err = c.Leases.Watch(wctx); err != nil {
			stop()
			return unavailableErr(err)
		}
	}
	s.feed.stop = stop
	s.feed.wg.Add(1)
	go func() {
		defer s.feed.wg.Done()
		s.notifyChanges(wctx, sw, lw)
		// A watch that ended by itself (the connection closed for good):
		// the next subscribe starts another.
		s.feed.mu.Lock()
		if wctx.Err() == nil && s.feed.stop != nil {
			s.feed.stop()
			s.feed.stop = nil
		}
		s.feed.mu.Unlock()
	}()
	return nil
}

func (s *Server) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	if req.Params.URI != StatusURI {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	s.stopFeed()
	return nil
}

// stopFeed ends the status watch, if any, and waits for it.
func (s *Server) stopFeed() {
	s.feed.mu.Lock()
	stop := s.feed.stop
	s.feed.stop = nil
	s.feed.mu.Unlock()
	if stop != nil {
		stop()
	}
	s.feed.wg.Wait()
}

// notifyChanges sends an updated notification of the status resource
// after each change of a session or lease, at most every
// statusNotifyEvery, until ctx ends or a watch does.
func (s *Server) notifyChanges(ctx context.Context, sw <-chan session.Event, lw <-chan lease.Event) {
	tick := time.NewTicker(statusNotifyEvery)
	defer tick.Stop()
	dirty := false
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-sw:
			if !ok {
				return
			}
			dirty = dirty || e.Kind != session.EventPresent && e.Kind != session.EventSynced
		case e, ok := <-lw:
			if !ok {
				lw = nil
				continue
			}
			dirty = dirty || e.Kind != lease.EventPresent && e.Kind != lease.EventSynced
		case <-tick.C:
			if !dirty {
				continue
			}
			dirty = false
			nctx, cancel := context.WithTimeout(ctx, time.Second)
			_ = s.srv.ResourceUpdated(nctx, &mcp.ResourceUpdatedNotificationParams{URI: StatusURI})
			cancel()
		}
	}
}
