package web

import "sync"

// ref names one thing that changed: a kind and a key.
type ref struct{ kind, key string }

// hub fans the model's changes out to the event streams. Each subscriber
// keeps a set of what changed since it last sent, so a key that changes
// ten times between two sends is sent once, as it is then: a slow browser
// costs memory bounded by the number of keys, never a queue of events.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	kinds map[string]bool // nil: every kind
	mu    sync.Mutex
	dirty map[ref]struct{}
	order []ref
	ready chan struct{} // holds one token while dirty is not empty
}

func newHub() *hub { return &hub{subs: map[*subscriber]struct{}{}} }

// subscribe returns a subscriber to the given kinds (none: every kind).
func (h *hub) subscribe(kinds ...string) *subscriber {
	s := &subscriber{dirty: map[ref]struct{}{}, ready: make(chan struct{}, 1)}
	if len(kinds) > 0 {
		s.kinds = map[string]bool{}
		for _, k := range kinds {
			s.kinds[k] = true
		}
	}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// publish marks kind/key changed for every subscriber to kind.
func (h *hub) publish(kind, key string) {
	r := ref{kind, key}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.kinds != nil && !s.kinds[kind] {
			continue
		}
		s.mu.Lock()
		if _, ok := s.dirty[r]; !ok {
			s.dirty[r] = struct{}{}
			s.order = append(s.order, r)
		}
		s.mu.Unlock()
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
}

// take returns what changed since the last take, in the order of the first
// change of each, and forgets it.
func (s *subscriber) take() []ref {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.order
	s.order = nil
	clear(s.dirty)
	return out
}
