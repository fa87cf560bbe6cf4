package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/kv"
)

// What a schedule does with ticks it missed.
const (
	// CatchUpOne adds one task for the ticks missed while no dispatcher
	// ran (the latest of them).
	CatchUpOne = "one"
	// CatchUpNone adds none for them.
	CatchUpNone = "none"
)

// Schedule adds a task to its queue at each tick of a cron expression or
// of a fixed period (key <queue>.schedule.<name>). The queue's dispatcher
// adds the tasks: each tick's task has an id made of the schedule's name
// and the tick's time, created by compare-and-set, so two dispatchers, or
// one that crashed mid-tick and its successor, never add a tick twice.
// JSON fields evolve additively: unknown fields are kept when rewritten.
//
//jsonrec:codec
type Schedule struct {
	Queue string `json:"queue"`
	Name  string `json:"name"`
	// Cron is a standard cron expression (five fields, or @hourly and the
	// like), read in Timezone; Every a fixed period, its ticks the
	// multiples of it since the Unix epoch. One of them is set.
	Cron     string   `json:"cron,omitempty"`
	Every    Duration `json:"every,omitempty"`
	Timezone string   `json:"timezone,omitempty"`
	// What each tick adds.
	Key      string            `json:"key"`
	Payload  []byte            `json:"payload"`
	Priority Priority          `json:"priority"`
	Labels   map[string]string `json:"labels"`
	// CatchUp is CatchUpOne or CatchUpNone.
	CatchUp string `json:"catch_up"`
	Paused  bool   `json:"paused,omitempty"`
	// LastTick is the latest tick dealt with (its task added, or skipped),
	// by the server's clock; zero: none yet, ticks count from the record's
	// revision.
	LastTick  time.Time `json:"last_tick,omitzero"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	// Revision of the record and its server time (not stored).
	Revision uint64    `json:"-"`
	Written  time.Time `json:"-"`

	unknown jsonrec.Unknown
	spec    cron.Schedule
}

// scheduleFields is Schedule without its methods, for encoding/json.
type scheduleFields Schedule

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (s Schedule) MarshalJSON() ([]byte, error) {
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if len(s.unknown) == 0 {
		if b, ok := s.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(scheduleFields(s), s.unknown)
}

// UnmarshalJSON reads the known fields and keeps the others.
func (s *Schedule) UnmarshalJSON(data []byte) error {
	if s.decodeFast(data, 0) {
		return nil
	}
	var f scheduleFields
	unknown, err := jsonrec.Unmarshal(data, &f, scheduleKnown)
	if err != nil {
		return err
	}
	*s = Schedule(f)
	s.unknown = unknown
	return nil
}

func scheduleKey(q, name string) string   { return q + ".schedule." + name }
func isScheduleKey(q, key string) bool    { return strings.HasPrefix(key, q+".schedule.") }
func scheduleNameOf(q, key string) string { return strings.TrimPrefix(key, q+".schedule.") }
func schedulePattern(q string) string     { return q + ".schedule.>" }
func scheduleTaskID(name string, tick time.Time) string {
	return name + "-" + tick.UTC().Format("20060102T150405Z")
}

// validate checks the schedule and parses its timing.
func (s *Schedule) validate() error {
	if err := kv.ValidateKey(s.Name); err != nil || strings.Contains(s.Name, ".") {
		return fmt.Errorf("%w: schedule name %q: use 1-100 characters of A-Z a-z 0-9 - _ =", ErrInvalid, s.Name)
	}
	if len(s.Name) > 100 {
		return fmt.Errorf("%w: schedule name %q: at most 100 characters", ErrInvalid, s.Name)
	}
	switch {
	case s.Cron != "" && s.Every != 0:
		return fmt.Errorf("%w: schedule %s: give a cron expression or a period, not both", ErrInvalid, s.Name)
	case s.Every != 0:
		if time.Duration(s.Every) < time.Second || time.Duration(s.Every)%time.Second != 0 {
			return fmt.Errorf("%w: schedule %s: period %s: use whole seconds, at least 1s", ErrInvalid, s.Name, time.Duration(s.Every))
		}
		if s.Timezone != "" {
			return fmt.Errorf("%w: schedule %s: a period's ticks are multiples of it since the epoch; a timezone is for a cron expression", ErrInvalid, s.Name)
		}
	case s.Cron != "":
		if strings.Contains(s.Cron, "TZ=") {
			return fmt.Errorf("%w: schedule %s: give the timezone apart (--timezone), not in the expression", ErrInvalid, s.Name)
		}
		tz := s.Timezone
		if tz == "" {
			tz = "UTC"
		}
		if _, err := time.LoadLocation(tz); err != nil {
			return fmt.Errorf("%w: schedule %s: timezone %q: %v", ErrInvalid, s.Name, tz, err)
		}
		spec, err := cron.ParseStandard("CRON_TZ=" + tz + " " + s.Cron)
		if err != nil {
			return fmt.Errorf("%w: schedule %s: cron expression %q: %v", ErrInvalid, s.Name, s.Cron, err)
		}
		s.spec = spec
	default:
		return fmt.Errorf("%w: schedule %s: give a cron expression (--cron) or a period (--every)", ErrInvalid, s.Name)
	}
	if s.CatchUp != CatchUpOne && s.CatchUp != CatchUpNone {
		return fmt.Errorf("%w: schedule %s: catch-up %q: use one or none", ErrInvalid, s.Name, s.CatchUp)
	}
	if s.Priority.rank() < 0 {
		return fmt.Errorf("%w: schedule %s: priority %q: use high, normal or low", ErrInvalid, s.Name, s.Priority)
	}
	return validLabels(s.Labels)
}

// Next is the schedule's first tick after t.
func (s *Schedule) Next(t time.Time) time.Time {
	if s.Every > 0 {
		d := time.Duration(s.Every)
		return time.Unix(0, 0).Add((t.Sub(time.Unix(0, 0))/d + 1) * d).UTC()
	}
	if s.spec == nil {
		return time.Time{}
	}
	return s.spec.Next(t).UTC()
}

// NextTick is the schedule's next tick after server time now (zero: it
// is paused).
func (s *Schedule) NextTick(now time.Time) time.Time {
	if s.Paused {
		return time.Time{}
	}
	from := s.from()
	if now.After(from) {
		from = now
	}
	return s.Next(from)
}

// from is where ticks count from: the last one dealt with, else the
// record's revision.
func (s *Schedule) from() time.Time {
	if !s.LastTick.IsZero() {
		return s.LastTick
	}
	return s.Written
}

func decodeSchedule(q string, e kv.Entry) (*Schedule, error) {
	var s Schedule
	if err := s.UnmarshalJSON(e.Value); err != nil {
		return nil, fmt.Errorf("%w: schedule %s: %w", ErrUndecodable, e.Key, err)
	}
	if s.Queue != q || s.Name != scheduleNameOf(q, e.Key) {
		return nil, fmt.Errorf("%w: schedule %s names queue %q, schedule %q", ErrUndecodable, e.Key, s.Queue, s.Name)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%w: schedule %s: %w", ErrUndecodable, e.Key, err)
	}
	s.Revision, s.Written = e.Revision, e.Created
	return &s, nil
}

// sameSchedule compares what two schedules add and when.
func sameSchedule(a, b *Schedule) bool {
	return a.Cron == b.Cron && a.Every == b.Every && a.Timezone == b.Timezone && a.Key == b.Key &&
		string(a.Payload) == string(b.Payload) && a.Priority == b.Priority && maps.Equal(a.Labels, b.Labels) &&
		a.CatchUp == b.CatchUp
}

// AddSchedule makes schedule s of queue s.Queue (Name, Cron or Every, Key
// set; Timezone, Payload, Priority, Labels and CatchUp optional: UTC,
// none, normal, none, CatchUpOne). It returns the schedule and whether it
// was created: one of that name with the same settings is left as it is
// (created false); one with other settings is ErrScheduleExists.
func (qs *Queues) AddSchedule(ctx context.Context, s Schedule) (*Schedule, bool, error) {
	cfg, err := qs.Config(ctx, s.Queue)
	if err != nil {
		return nil, false, err
	}
	if s.Priority == "" {
		s.Priority = Normal
	}
	if s.CatchUp == "" {
		s.CatchUp = CatchUpOne
	}
	s.Labels = maps.Clone(s.Labels)
	if err := s.validate(); err != nil {
		return nil, false, err
	}
	if err := ValidateKey(cfg, s.Key); err != nil {
		return nil, false, err
	}
	s.LastTick, s.Paused = time.Time{}, false
	now := qs.now().UTC()
	s.CreatedAt, s.UpdatedAt = now, now
	data, err := s.MarshalJSON()
	if err != nil {
		return nil, false, err
	}
	rev, err := qs.bucket.Create(ctx, scheduleKey(s.Queue, s.Name), data, 0)
	var ce *kv.ConflictError
	switch {
	case err == nil:
		s.Revision = rev
		return &s, true, nil
	case errors.As(err, &ce) && ce.Current != nil && ce.Current.Live():
		have, derr := decodeSchedule(s.Queue, *ce.Current)
		if derr != nil {
			return nil, false, derr
		}
		if sameSchedule(have, &s) {
			return have, false, nil
		}
		return have, false, fmt.Errorf("%w: schedule %s of queue %s exists with other settings", ErrScheduleExists, s.Name, s.Queue)
	default:
		return nil, false, err
	}
}

// GetSchedule reads schedule name of queue q.
func (qs *Queues) GetSchedule(ctx context.Context, q, name string) (*Schedule, error) {
	e, err := qs.bucket.Get(ctx, scheduleKey(q, name))
	if errors.Is(err, kv.ErrNotFound) {
		if _, cerr := qs.Config(ctx, q); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("%w: %s in queue %s", ErrScheduleNotFound, name, q)
	}
	if err != nil {
		return nil, err
	}
	return decodeSchedule(q, e)
}

// Schedules lists the schedules of queue q by name; records that do not
// decode are returned as errors beside them.
func (qs *Queues) Schedules(ctx context.Context, q string) ([]*Schedule, []error, error) {
	if _, err := qs.Config(ctx, q); err != nil {
		return nil, nil, err
	}
	entries, err := qs.bucket.ListMatching(ctx, schedulePattern(q))
	if err != nil {
		return nil, nil, err
	}
	var out []*Schedule
	var bad []error
	for _, e := range entries {
		s, err := decodeSchedule(q, e)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, bad, nil
}

// RemoveSchedule deletes schedule name of queue q (one that does not
// decode too): no tick after it adds a task. The tasks it added stay.
func (qs *Queues) RemoveSchedule(ctx context.Context, q, name string) error {
	for attempt := 1; ; attempt++ {
		e, err := qs.bucket.Get(ctx, scheduleKey(q, name))
		if errors.Is(err, kv.ErrNotFound) {
			if _, cerr := qs.Config(ctx, q); cerr != nil {
				return cerr
			}
			return fmt.Errorf("%w: %s in queue %s", ErrScheduleNotFound, name, q)
		}
		if err != nil {
			return err
		}
		err = qs.bucket.Delete(ctx, scheduleKey(q, name), e.Revision, []byte("removed"))
		if !errors.Is(err, kv.ErrConflict) || attempt == 4 {
			return err
		}
	}
}

// PauseSchedule stops schedule name from adding tasks; ResumeSchedule
// lets it add them again from the next tick on (the ticks of the pause are
// not owed).
func (qs *Queues) PauseSchedule(ctx context.Context, q, name string) (*Schedule, error) {
	return qs.setSchedule(ctx, q, name, func(s *Schedule) { s.Paused = true })
}

// ResumeSchedule undoes PauseSchedule.
func (qs *Queues) ResumeSchedule(ctx context.Context, q, name string) (*Schedule, error) {
	return qs.setSchedule(ctx, q, name, func(s *Schedule) {
		if s.Paused {
			s.Paused, s.LastTick = false, time.Time{} // ticks count from this revision
		}
	})
}

func (qs *Queues) setSchedule(ctx context.Context, q, name string, fn func(*Schedule)) (*Schedule, error) {
	for attempt := 1; ; attempt++ {
		s, err := qs.GetSchedule(ctx, q, name)
		if err != nil {
			return nil, err
		}
		next := *s
		next.unknown = maps.Clone(s.unknown)
		fn(&next)
		if next.Paused == s.Paused && next.LastTick.Equal(s.LastTick) {
			return s, nil
		}
		next.UpdatedAt = qs.now().UTC()
		data, err := next.MarshalJSON()
		if err != nil {
			return nil, err
		}
		rev, err := qs.bucket.Update(ctx, scheduleKey(q, name), data, 0, s.Revision)
		if err == nil {
			next.Revision, next.Written = rev, time.Time{}
			return &next, nil
		}
		if !errors.Is(err, kv.ErrConflict) || attempt == 4 {
			return nil, err
		}
	}
}
