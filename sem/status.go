package sem

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/kv"
)

// Holder is a permit as its unit records show it.
type Holder struct {
	Permit string `json:"permit"`
	// Index is the permit's lowest unit, unique among live permits.
	Index  int    `json:"index"`
	Weight int    `json:"weight"`
	Units  []int  `json:"units"`
	Host   string `json:"host"`
	PID    int    `json:"pid"`
	// PIDStart is PID's start token.
	PIDStart   string            `json:"pid_start,omitempty"`
	AcquiredAt time.Time         `json:"acquired_at"`
	RenewedAt  time.Time         `json:"renewed_at"`
	Meta       map[string]string `json:"meta,omitempty"`
	// Revision is the highest revision of its units now.
	Revision uint64 `json:"revision"`
	// Fence is the permit's fence, when known (its own process knows it).
	Fence uint64 `json:"fence,omitempty"`
	// Undecodable says why a unit's record does not decode: such a unit
	// is held by nobody-knows-who until its TTL ends or it is removed.
	Undecodable string `json:"undecodable,omitempty"`
}

// Status is a semaphore and who holds it.
type Status struct {
	Name string `json:"name"`
	// Max is the units of the semaphore, or of each host for a per-host
	// one (PerHost), whose status is one host's (Host; empty when no host
	// holds or waits for any).
	Max       int       `json:"max"`
	PerHost   bool      `json:"per_host,omitempty"`
	Host      string    `json:"host,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Held      int       `json:"held"`
	Free      int       `json:"free"`
	Holders   []Holder  `json:"holders"`
	// Waiters wait in line, first first.
	Waiters []Waiter `json:"waiters"`
}

// Waiter is an acquirer waiting in a semaphore's line.
type Waiter struct {
	ID       string    `json:"id"`
	Weight   int       `json:"weight"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	PIDStart string    `json:"pid_start,omitempty"`
	Since    time.Time `json:"since"`
	// Place is the revision at which it began to wait: lower goes first.
	Place uint64 `json:"place"`
}

// Status reads semaphore name and its holders: of this host, for a
// per-host semaphore (Statuses reads every host's).
func (s *Semaphores) Status(ctx context.Context, name string) (Status, error) {
	c, err := s.Config(ctx, name)
	if err != nil {
		return Status{}, err
	}
	v, err := s.read(ctx, c)
	if err != nil {
		return Status{}, err
	}
	return s.statusHere(c, v), nil
}

// statusHere is the status of this host's space of c, as v shows it.
func (s *Semaphores) statusHere(c Config, v view) Status {
	host := ""
	if c.PerHost() {
		host = s.host
	}
	return statusOf(c, v, host)
}

// Statuses reads semaphore name with one listing: its status, or for a
// per-host semaphore one per host that holds or waits for its units,
// sorted by host (one with no host if none does).
func (s *Semaphores) Statuses(ctx context.Context, name string) ([]Status, error) {
	c, err := s.Config(ctx, name)
	if err != nil {
		return nil, err
	}
	es, err := s.bucket.Entries(ctx, "sem."+name+".>")
	if err != nil {
		return nil, err
	}
	return statusesOf(c, es), nil
}

func statusOf(c Config, v view, host string) Status {
	out := Status{Name: c.Name, Max: c.Units(), PerHost: c.PerHost(), Host: host, CreatedAt: c.CreatedAt, Holders: holdersOf(v.units), Waiters: []Waiter{}}
	if out.Holders == nil {
		out.Holders = []Holder{}
	}
	for _, w := range v.waiters {
		out.Waiters = append(out.Waiters, Waiter{ID: w.ID, Weight: max(w.Weight, 1), Host: w.Host, PID: w.PID, PIDStart: w.PIDStart, Since: w.Since, Place: w.Place()})
	}
	for _, u := range v.units {
		if u.live {
			out.Held++
		}
	}
	out.Free = out.Max - out.Held
	return out
}

// statusesOf is semaphore c as its entries es (its keys but its record)
// show it: one status, or one per host's space that holds or waits for
// any unit.
func statusesOf(c Config, es []kv.Entry) []Status {
	if !c.PerHost() {
		return []Status{statusOf(c, viewOf(c, c.Name, es), "")}
	}
	spaces := map[string][]kv.Entry{} // by host token
	prefix := "sem." + c.Name + ".h."
	for _, e := range es {
		if rest, ok := strings.CutPrefix(e.Key, prefix); ok {
			tok, _, _ := strings.Cut(rest, ".")
			spaces[tok] = append(spaces[tok], e)
		}
	}
	var out []Status
	for tok, ses := range spaces {
		space := c.Name + ".h." + tok
		v := viewOf(c, space, ses)
		host := ""
		for _, u := range v.units {
			if u.live && u.rec != nil {
				host = u.rec.Host
			}
		}
		for _, w := range v.waiters {
			if host == "" {
				host = w.Host
			}
		}
		st := statusOf(c, v, host)
		if st.Held == 0 && len(st.Waiters) == 0 {
			continue // tombstones of a host that holds nothing now
		}
		if st.Host == "" {
			st.Host = tok // held, but by records that do not decode
		}
		out = append(out, st)
	}
	if len(out) == 0 {
		return []Status{statusOf(c, view{units: make([]unitState, c.Units())}, "")}
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Host, b.Host) })
	return out
}

// List reads every semaphore with its holders, sorted by name (a per-host
// semaphore once per host, as Statuses), in one listing of the bucket. A
// semaphore whose record does not decode is left out, and counted in the
// second result.
func (s *Semaphores) List(ctx context.Context) ([]Status, int, error) {
	es, err := s.bucket.Entries(ctx, "sem.>")
	if err != nil {
		return nil, 0, err
	}
	configs := map[string]Config{}
	bad := 0
	for _, e := range es {
		name, ok := strings.CutPrefix(e.Key, "sem.")
		if !ok || strings.Contains(name, ".") {
			continue
		}
		c, err := decodeConfig(name, e)
		if err != nil {
			bad++
			continue
		}
		configs[name] = c
	}
	per := map[string][]kv.Entry{}
	for _, e := range es {
		rest, _ := strings.CutPrefix(e.Key, "sem.")
		if name, _, ok := strings.Cut(rest, "."); ok {
			if _, known := configs[name]; known {
				per[name] = append(per[name], e)
			}
		}
	}
	out := make([]Status, 0, len(configs))
	for name, c := range configs {
		out = append(out, statusesOf(c, per[name])...)
	}
	slices.SortStableFunc(out, func(a, b Status) int {
		if n := strings.Compare(a.Name, b.Name); n != 0 {
			return n
		}
		return strings.Compare(a.Host, b.Host)
	})
	return out, bad, nil
}
