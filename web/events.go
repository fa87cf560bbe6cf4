package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/batonhq/baton/view"
)

// EventChange is one entry of the event stream: the current document of
// one kind/key, or, with op "delete", word that it is gone.
type EventChange struct {
	Kind string `json:"kind"`
	Key  string `json:"key"`
	Op   string `json:"op"` // put or delete
	Doc  any    `json:"doc,omitempty"`
}

// Batch is one server-sent event of the stream: the changes gathered in
// one batch interval, and the server time they were rendered at.
type Batch struct {
	ServerTime time.Time     `json:"server_time"`
	Changes    []EventChange `json:"changes"`
}

// heartbeat is how often an idle stream sends a comment, so proxies and
// browsers keep it open.
const heartbeat = 15 * time.Second

var allKinds = []string{KindSession, KindLease, KindAgent, KindQueue, KindSemaphore, KindLimiter, KindSpace, KindOverview}

// apiEvents streams changes as server-sent events: first "hello" (the
// server time), then "changes" events (a Batch each). ?kinds=agent,session
// limits the kinds. A browser that reconnects reads the views again.
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request) {
	var kinds []string
	if k := r.URL.Query().Get("kinds"); k != "" {
		for _, kind := range strings.Split(k, ",") {
			ok := false
			for _, known := range allKinds {
				ok = ok || kind == known
			}
			if !ok {
				writeError(w, fmt.Errorf("%w: kind %q: want some of %s", ErrInvalid, kind, strings.Join(allKinds, ",")))
				return
			}
			kinds = append(kinds, kind)
		}
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	sub := s.hub.subscribe(kinds...)
	defer s.hub.unsubscribe(sub)
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	w.WriteHeader(http.StatusOK)
	if err := writeEvent(w, "hello", map[string]any{"server_time": s.model.ServerNow(), "read_only": s.readOnly}); err != nil {
		return
	}
	_ = rc.Flush()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			_ = rc.Flush()
			continue
		case <-sub.ready:
		}
		// Gather what else changes within the batch interval.
		select {
		case <-r.Context().Done():
			return
		case <-time.After(s.batch):
		}
		b := s.render(sub.take())
		if len(b.Changes) == 0 {
			continue
		}
		if err := writeEvent(w, "changes", b); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		s.metrics.eventsSent.Add(float64(len(b.Changes)))
	}
}

func writeEvent(w http.ResponseWriter, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	return err
}

// render turns what changed into the current documents.
func (s *Server) render(refs []ref) Batch {
	b := Batch{ServerTime: s.model.ServerNow(), Changes: make([]EventChange, 0, len(refs))}
	for _, r := range refs {
		c := EventChange{Kind: r.kind, Key: r.key, Op: "put"}
		var doc any
		var err error
		switch r.kind {
		case KindSession:
			var row map[string]any
			if row, err = s.model.sessionRow(r.key, s.staleAfter); row != nil {
				doc = row
			}
		case KindLease:
			var row map[string]any
			if row, err = s.model.leaseRow(r.key, s.staleAfter); row != nil {
				doc = row
			}
		case KindAgent:
			var v *AgentView
			if v, err = s.model.Agent(r.key); v != nil {
				doc = v
			}
		case KindQueue:
			if s.queues != nil {
				if snap := s.queues.Snapshot(r.key); snap != nil {
					doc, err = view.QueueStatusJSON(snap, "", false)
				}
			}
		case KindSemaphore:
			if s.limits != nil {
				if v := s.limits.Semaphore(r.key); v != nil {
					doc = v
				}
			}
		case KindLimiter:
			if s.limits != nil {
				if v := s.limits.Limiter(r.key); v != nil {
					doc = v
				}
			}
		case KindSpace:
			if s.spaces != nil {
				if v := s.spaces.Space(r.key); v != nil {
					doc = v
				}
			}
		case KindOverview:
			doc = s.overview()
		}
		if err != nil {
			s.log.Warn("event not rendered", "kind", r.kind, "key", r.key, "err", err)
			continue
		}
		if doc == nil {
			c.Op = "delete"
		} else {
			c.Doc = doc
		}
		b.Changes = append(b.Changes, c)
	}
	return b
}
