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
	Name      string    `json:"name"`
	Max       int       `json:"max"`
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

// Status reads semaphore name and its holders.
func (s *Semaphores) Status(ctx context.Context, name string) (Status, error) {
	c, err := s.Config(ctx, name)
	if err != nil {
		return Status{}, err
	}
	v, err := s.read(ctx, c)
	if err != nil {
		return Status{}, err
	}
	return statusOf(c, v), nil
}

func statusOf(c Config, v view) Status {
	out := Status{Name: c.Name, Max: c.Max, CreatedAt: c.CreatedAt, Holders: holdersOf(v.units), Waiters: []Waiter{}}
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
	out.Free = c.Max - out.Held
	return out
}

// List reads every semaphore with its holders, sorted by name, in one
// listing of the bucket. A semaphore whose record does not decode is left
// out, and counted in the second result.
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
		out = append(out, statusOf(c, viewOf(c, per[name])))
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return out, bad, nil
}
