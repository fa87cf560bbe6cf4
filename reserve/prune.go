package reserve

// What doctor --fix does for a space: drop what every write drops.

import (
	"context"
	"time"
)

// Prune writes space's record again, by compare-and-set, with nothing
// changed but what every write of the space drops (adr/0056): the
// reservations past their TTL by the server's clock now, and those whose
// holder's process is gone on this host; waiting reservations then free
// are made held, in order. The next write of the space would do the same;
// Prune is for a space nobody writes. It returns how many reservations it
// found to drop (0: it wrote nothing).
func (s *Spaces) Prune(ctx context.Context, space string) (int, error) {
	if err := ValidSpace(space); err != nil {
		return 0, err
	}
	st, err := s.read(ctx, space)
	if err != nil {
		return 0, err
	}
	now, err := s.bucket.ServerTime(ctx)
	if err != nil {
		return 0, err
	}
	n := len(st.rec.Entries) - len(prune(st.clone().Entries, now, s.deadHere))
	if n == 0 {
		return 0, nil
	}
	_, err = s.change(ctx, space, "prune", now, func(*Record, []compiled, time.Time) error { return nil })
	return n, err
}

// HolderGone reports whether e is held (or waited for) by a process of
// this host that is gone: the next write of its space drops it.
func (s *Spaces) HolderGone(e *Entry) bool { return s.deadHere(e) }
