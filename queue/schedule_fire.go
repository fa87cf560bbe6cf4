package queue

// The dispatcher adds the tasks of the queue's schedules (adr/0049): it
// keeps each schedule from its watch, with a timer for its next tick; at a
// tick it creates the tick's task (an id made of the schedule's name and
// the tick's time, so a tick is never added twice) and then writes the
// tick into the schedule as its last one.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/kv"
)

// maxTicksAtOnce bounds the late ticks one pass adds for a schedule.
const maxTicksAtOnce = 1000

// scheduleRetry is how long a schedule whose tick failed to be written
// waits to try again.
const scheduleRetry = time.Second

// schedState is a schedule as the dispatcher follows it.
type schedState struct {
	s      *Schedule
	due    time.Time // this host's time of its next tick (zero: paused)
	firing bool      // its ticks are being written
}

// applySchedule takes a version of a schedule from the queue's watch.
func (d *dispatcher) applySchedule(l *loop, e kv.Entry) {
	name := scheduleNameOf(l.w.q, e.Key)
	if !e.Live() {
		delete(d.scheds, name)
		return
	}
	s, err := decodeSchedule(l.w.q, e)
	if err != nil {
		return // left for doctor; the last good version stays
	}
	st := d.scheds[name]
	if st == nil {
		st = &schedState{}
		d.scheds[name] = st
	} else if st.s.Revision > s.Revision {
		return
	}
	st.s = s
	d.planSchedule(l, st)
}

// planSchedule sets when st's next tick is due on this host: the server's
// clock must surely be past it (the worker's offset, less what the offset
// may be ahead by).
func (d *dispatcher) planSchedule(l *loop, st *schedState) {
	st.due = time.Time{}
	if st.s.Paused {
		return
	}
	if next := st.s.Next(st.s.from()); !next.IsZero() {
		st.due = next.Add(-l.offset + l.early)
	}
}

// nextSchedule is the local time of the soonest tick (zero: none).
func (d *dispatcher) nextSchedule() time.Time {
	var at time.Time
	for _, st := range d.scheds {
		if !st.firing && !st.due.IsZero() && (at.IsZero() || st.due.Before(at)) {
			at = st.due
		}
	}
	return at
}

// fireSchedules writes the ticks due by now.
func (d *dispatcher) fireSchedules(l *loop, now time.Time) {
	if !d.qSynced {
		return
	}
	serverNow := now.Add(l.offset - l.early) // no later than the server's clock
	for name, st := range d.scheds {
		if st.firing || st.due.IsZero() || st.due.After(now) {
			continue
		}
		ticks, last := ticksDue(st.s, serverNow, 2*time.Duration(l.cfg.TTL)+time.Second)
		if last.IsZero() {
			d.planSchedule(l, st) // woken early: nothing is due yet
			continue
		}
		ticks = retained(ticks, serverNow, time.Duration(l.cfg.Retention))
		st.firing = true
		s := st.s
		stamp := l.stampNow()
		l.bg.Add(1)
		l.pool.Go(func() {
			defer l.bg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*l.w.qs.bucket.Client().Timeout())
			defer cancel()
			rev, err := l.w.qs.writeTicks(ctx, s, ticks, last, stamp)
			l.post(func() {
				st.firing = false
				if d.scheds[name] != st {
					return // removed meanwhile
				}
				switch {
				case errors.Is(err, errScheduleMoved):
					st.due = time.Now().Add(scheduleRetry) // unless the watch brings it first
				case err != nil:
					l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("schedule %s of queue %s: %w", name, l.w.q, err)})
					st.due = time.Now().Add(scheduleRetry)
				case st.s == s:
					// The watch will bring the record as written; meanwhile
					// the next tick counts from this one.
					n := *s
					n.LastTick, n.Revision = last, rev
					st.s = &n
					d.planSchedule(l, st)
				default:
					d.planSchedule(l, st) // a newer version came meanwhile
				}
			})
		})
	}
}

// retained are the ticks younger than the queue's retention at server
// time now: a tick's task, had a dispatcher added it and died before its
// last_tick was written, is still there to refuse a second create (a
// task lives at least the retention past its end, which comes after its
// tick). Older ticks are skipped, never added twice.
func retained(ticks []time.Time, now time.Time, retention time.Duration) []time.Time {
	out := ticks[:0]
	for _, t := range ticks {
		if now.Sub(t) < retention {
			out = append(out, t)
		}
	}
	return out
}

// ticksDue are the ticks of s to add at server time now, and the latest
// tick dealt with (added or skipped; zero: none is due). Ticks more than
// late behind now were missed while no dispatcher ran (a dispatcher's
// failover takes up to the TTL): of those, CatchUpOne adds the latest and
// CatchUpNone none. Ticks within late of now are all added.
func ticksDue(s *Schedule, now time.Time, late time.Duration) (add []time.Time, last time.Time) {
	from := s.from()
	if edge := now.Add(-late); from.Before(edge) {
		if missed := latestTick(s, from, edge); !missed.IsZero() {
			if s.CatchUp == CatchUpOne {
				add = append(add, missed)
			}
			last = missed
		}
		from = edge
	}
	for t := s.Next(from); !t.IsZero() && !t.After(now) && len(add) < maxTicksAtOnce; t = s.Next(t) {
		add = append(add, t)
		last = t
	}
	return add, last
}

// latestTick is the latest tick of s after from and no later than to
// (zero: none).
func latestTick(s *Schedule, from, to time.Time) time.Time {
	if s.Every > 0 {
		d := time.Duration(s.Every)
		t := time.Unix(0, 0).Add(to.Sub(time.Unix(0, 0)) / d * d).UTC()
		if t.After(from) {
			return t
		}
		return time.Time{}
	}
	// A cron expression ticks at most once a minute: a year and a month
	// of them is at most 570,000 steps.
	if floor := to.Add(-400 * 24 * time.Hour); from.Before(floor) {
		from = floor
	}
	var last time.Time
	for t := s.Next(from); !t.IsZero() && !t.After(to); t = s.Next(t) {
		last = t
	}
	return last
}

// writeTicks adds the tasks of ticks (pipelined; a tick whose task exists
// was added already) and then writes last into the schedule as its last
// tick, by compare-and-set on s's revision. It returns the schedule's new
// revision.
func (qs *Queues) writeTicks(ctx context.Context, s *Schedule, ticks []time.Time, last, stamp time.Time) (uint64, error) {
	ws := make([]kv.Write, 0, len(ticks))
	for _, tick := range ticks {
		t := &Task{
			ID: scheduleTaskID(s.Name, tick), Queue: s.Queue, Key: s.Key, Priority: s.Priority, Labels: s.Labels,
			Payload: s.Payload, State: StatePending, AddedAt: stamp, UpdatedAt: stamp, RunAt: tick, Schedule: s.Name,
		}
		data, err := encodeTask(t)
		if err != nil {
			return 0, err
		}
		ws = append(ws, kv.Write{Kind: kv.WriteCreate, Key: taskKey(s.Queue, t.ID), Value: data})
	}
	for _, r := range qs.bucket.Pipeline(ctx, ws) {
		if r.Err != nil && !errors.Is(r.Err, kv.ErrConflict) {
			return 0, r.Err
		}
	}
	n := *s
	n.LastTick, n.UpdatedAt = last, stamp
	data, err := n.MarshalJSON()
	if err != nil {
		return 0, err
	}
	rev, err := qs.bucket.Update(ctx, scheduleKey(s.Queue, s.Name), data, 0, s.Revision)
	if errors.Is(err, kv.ErrConflict) {
		return 0, errScheduleMoved
	}
	return rev, err
}

// errScheduleMoved: the schedule changed while its ticks were written (a
// pause, an edit, another dispatcher): its new version comes by the watch.
var errScheduleMoved = errors.New("the schedule changed meanwhile")
