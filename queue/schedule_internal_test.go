package queue

import (
	"slices"
	"testing"
	"time"
)

// Ticks late by less than the window are all added; ticks missed for
// longer are added once (catch-up one: the latest of them) or not at all
// (none); the last tick dealt with is the latest due.
func TestTicksDue(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	every := &Schedule{Name: "s", Every: Duration(time.Second), CatchUp: CatchUpOne, LastTick: at(0)}
	cases := []struct {
		name     string
		catchUp  string
		now      time.Time
		want     []time.Time
		wantLast time.Time
	}{
		{"nothing due yet", CatchUpOne, at(0).Add(900 * time.Millisecond), nil, time.Time{}},
		{"one tick due", CatchUpOne, at(1).Add(time.Millisecond), []time.Time{at(1)}, at(1)},
		{"late within the window: all", CatchUpOne, at(3), []time.Time{at(1), at(2), at(3)}, at(3)},
		{"missed, catch-up one", CatchUpOne, at(10), []time.Time{at(5), at(6), at(7), at(8), at(9), at(10)}, at(10)},
		{"missed, catch-up none", CatchUpNone, at(10), []time.Time{at(6), at(7), at(8), at(9), at(10)}, at(10)},
	}
	for _, c := range cases {
		s := *every
		s.CatchUp = c.catchUp
		got, last := ticksDue(&s, c.now, 5*time.Second)
		if !slices.EqualFunc(got, c.want, time.Time.Equal) || !last.Equal(c.wantLast) {
			t.Errorf("%s: ticks %v, last %v; want %v, %v", c.name, got, last, c.want, c.wantLast)
		}
	}
	// Missed ticks and none late: the latest missed is dealt with.
	s := *every
	s.CatchUp = CatchUpNone
	s.Every = Duration(time.Hour)
	s.LastTick = t0
	if got, last := ticksDue(&s, t0.Add(5*time.Hour+time.Minute), 5*time.Second); len(got) != 0 || !last.Equal(t0.Add(5*time.Hour)) {
		t.Errorf("hourly, 5 h missed, catch-up none: %v, last %v", got, last)
	}

	// A cron expression, in its timezone.
	c := &Schedule{Name: "c", Cron: "0 2 * * *", Timezone: "Europe/Berlin", CatchUp: CatchUpOne, LastTick: t0}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if next := c.Next(t0); !next.Equal(time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)) {
		t.Errorf("next 02:00 Berlin after %s: %s", t0, next)
	}
	got, last := ticksDue(c, t0.Add(10*24*time.Hour), time.Minute)
	if len(got) != 1 || !got[0].Equal(time.Date(2026, 12, 8, 1, 0, 0, 0, time.UTC)) || !last.Equal(got[0]) {
		t.Errorf("ten days missed, catch-up one: %v, last %v; want the latest, Dec 8 01:00 UTC", got, last)
	}
}

// Bad schedules are refused with the rule.
func TestSchedule_Validate(t *testing.T) {
	for _, s := range []Schedule{
		{Name: "a"},
		{Name: "a", Cron: "61 * * * *", CatchUp: CatchUpOne},
		{Name: "a", Cron: "* * * * *", Every: Duration(time.Minute), CatchUp: CatchUpOne},
		{Name: "a", Every: Duration(1500 * time.Millisecond), CatchUp: CatchUpOne},
		{Name: "a", Every: Duration(time.Minute), Timezone: "UTC", CatchUp: CatchUpOne},
		{Name: "a", Cron: "* * * * *", Timezone: "Mars/Olympus", CatchUp: CatchUpOne},
		{Name: "a", Cron: "CRON_TZ=UTC * * * * *", CatchUp: CatchUpOne},
		{Name: "a", Cron: "* * * * *", CatchUp: "all"},
		{Name: "a.b", Cron: "* * * * *", CatchUp: CatchUpOne},
	} {
		if err := s.validate(); err == nil {
			t.Errorf("%+v: valid, want a refusal", s)
		}
	}
}

// A tick older than the queue's retention is skipped, never added: its
// task, had it been added by a dispatcher that died before writing
// last_tick, may have gone with the retention, and a create would then
// add the tick a second time.
func TestRetainedTicks(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ticks := []time.Time{t0, t0.Add(time.Second), t0.Add(2 * time.Second)}
	got := retained(slices.Clone(ticks), t0.Add(3*time.Second), 2*time.Second)
	if want := ticks[2:]; !slices.Equal(got, want) {
		t.Fatalf("retained %v, want %v", got, want)
	}
	if got := retained(slices.Clone(ticks), t0.Add(3*time.Second), 24*time.Hour); !slices.Equal(got, ticks) {
		t.Fatalf("retained %v under a day's retention, want every tick", got)
	}
}
