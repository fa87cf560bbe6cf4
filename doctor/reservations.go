package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/reserve"
)

// KindSpaceLarge is a reservation space whose record has passed half of
// the largest message the server takes: it will soon refuse reservations
// (reserve.ErrSpaceFull).
const KindSpaceLarge = "space_large"

// WithReservations checks the path reservation spaces of rs too: records
// that do not decode, reservations past their TTL still in their record,
// reservations held by dead processes of this host, and records grown
// past half the server's largest message. Default: sessions only.
func WithReservations(rs *reserve.Spaces) Option { return func(c *Checker) { c.rs = rs } }

func (c *Checker) checkReservations(ctx context.Context, r *Report) error {
	b := c.rs.Bucket()
	es, err := b.Entries(ctx, reserve.KeyPrefix+">")
	if errors.Is(err, kv.ErrBucketNotFound) {
		return nil // no space was ever written (the semaphores' check reports the bucket)
	}
	if err != nil {
		return err
	}
	if len(es) == 0 {
		return nil
	}
	now, err := b.ServerTime(ctx)
	if err != nil {
		return err
	}
	maxPayload := int(b.Client().Conn().MaxPayload())
	for _, e := range es {
		st, err := spaceStatus(e, now)
		if err != nil {
			c.add(r, Finding{Kind: KindUndecodable, Key: e.Key,
				Detail: fmt.Sprintf("reservation space record %s does not decode (revision %d): %v; its paths are held by nobody knows whom, and nobody can reserve in the space", e.Key, e.Revision, err),
				Action: "inspect it (`nats kv get " + b.Name() + " " + e.Key + "`); remove it (`nats kv del`) once its holders are known to have stopped",
			})
			continue
		}
		c.checkSpace(r, st, maxPayload)
	}
	return nil
}

// spaceStatus decodes a space's record, its patterns too: a record whose
// patterns do not parse stops every write of the space as surely as one
// that is not JSON.
func spaceStatus(e kv.Entry, now time.Time) (reserve.Status, error) {
	var rec reserve.Record
	if err := rec.UnmarshalJSON(e.Value); err != nil {
		return reserve.Status{}, err
	}
	if reserve.Key(rec.Space) != e.Key {
		return reserve.Status{}, fmt.Errorf("it names space %q, whose key is %s", rec.Space, reserve.Key(rec.Space))
	}
	st, err := reserve.StatusOf(rec.Space, e, now)
	if err != nil {
		return reserve.Status{}, err
	}
	for _, row := range st.Reservations {
		if _, err := reserve.ParsePatterns(row.Patterns); err != nil {
			return reserve.Status{}, fmt.Errorf("reservation %s: %w", row.ID, err)
		}
	}
	return st, nil
}

// checkSpace judges one space's reservations and its size.
func (c *Checker) checkSpace(r *Report, st reserve.Status, maxPayload int) {
	space := st.Space
	prune := func(ctx context.Context) error {
		_, err := c.rs.Prune(ctx, space)
		return err
	}
	for _, row := range st.Reservations {
		what := "held"
		if row.Waiting {
			what = "waiting"
		}
		who := fmt.Sprintf("reservation %s of space %s (%s, %s, agent %q, task %q, host %s, pid %d)",
			row.ID, space, mode(row.Shared), what, row.Agent, row.Task, row.Host, row.PID)
		switch {
		case c.rs.HolderGone(&row.Entry):
			c.add(r, Finding{Kind: KindDeadHolder, Key: space,
				Detail: fmt.Sprintf("%s is held by a process of this host that is not running", who),
				Action: "`baton doctor --fix` frees it now (the space's next write from this host would too)",
				fix:    prune,
			})
		case row.State == "expired":
			past := st.ServerTime.Sub(row.ExpiresAt()).Round(time.Second)
			c.add(r, Finding{Kind: KindExpiredVisible, Key: space,
				Detail: fmt.Sprintf("%s expired %s ago and is still in the record: it holds nothing, but `baton reserve ls` shows it until the space's next write", who, past),
				Action: "`baton doctor --fix` rewrites the space without it (compare-and-set)",
				fix:    prune,
			})
		}
	}
	if maxPayload > 0 && st.Size > maxPayload/2 {
		c.add(r, Finding{Kind: KindSpaceLarge, Key: space,
			Detail: fmt.Sprintf("reservation space %s's record is %d bytes with %d reservations: more than half of the %d the server takes in one message; once full, reservations are refused (space full)",
				space, st.Size, len(st.Reservations), maxPayload),
			Action: "split it into a space per top-level directory (as app-src, app-docs), each path reserved in the space of its directory",
		})
	}
}

func mode(shared bool) string {
	if shared {
		return "shared"
	}
	return "exclusive"
}
