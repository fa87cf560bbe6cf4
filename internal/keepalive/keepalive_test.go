package keepalive

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// The schedule as a table: a key with a 30s TTL and a 10s grace, written
// at t0, then events, each checked at a time.
func TestMachine_Schedule(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const ttl = 30 * time.Second
	type step struct {
		event string // "renewed", "failed" or "" (just look)
		at    time.Duration
		want  Action
	}
	for _, tc := range []struct {
		name  string
		grace time.Duration
		steps []step
	}{
		{"renews every third of the TTL", 10 * time.Second, []step{
			{"", 0, Wait},
			{"", 9999 * time.Millisecond, Wait},
			{"", 10 * time.Second, Renew},
			{"renewed", 10 * time.Second, Wait},
			{"", 19 * time.Second, Wait},
			{"", 20 * time.Second, Renew},
		}},
		{"retries a failed renewal sooner", 10 * time.Second, []step{
			{"failed", 10 * time.Second, Wait},
			{"", 10*time.Second + 999*time.Millisecond, Wait},
			{"", 11 * time.Second, Renew},
			{"failed", 11 * time.Second, Wait},
			{"", 12 * time.Second, Renew},
			{"renewed", 12 * time.Second, Wait},
			{"", 21 * time.Second, Wait},
			{"", 22 * time.Second, Renew},
		}},
		// Deadline: 30s - 2s margin - min(10s, 30s/4 = 7.5s) = 20.5s.
		{"gives up at the local deadline, before the server could expire it", 10 * time.Second, []step{
			{"failed", 10 * time.Second, Wait},
			{"failed", 15 * time.Second, Wait},
			{"", 20499 * time.Millisecond, Renew},
			{"failed", 20499 * time.Millisecond, Wait},
			{"", 20500 * time.Millisecond, Lost},
		}},
		// Deadline with no grace: 30s - 2s = 28s.
		{"without grace the deadline is the expiry bound", 0, []step{
			{"", 27999 * time.Millisecond, Renew},
			{"", 28 * time.Second, Lost},
		}},
		{"a renewal moves the deadline", 10 * time.Second, []step{
			{"renewed", 15 * time.Second, Wait},
			{"", 24 * time.Second, Wait},
			{"", 25 * time.Second, Renew},
			{"", 35499 * time.Millisecond, Renew},
			{"", 35500 * time.Millisecond, Lost},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(ttl, tc.grace, t0)
			for i, s := range tc.steps {
				switch s.event {
				case "renewed":
					m.Renewed(at(s.at))
				case "failed":
					m.Failed(at(s.at))
				}
				if got := m.Due(at(s.at)); got != s.want {
					t.Fatalf("step %d (%s at %s): %s, want %s", i, s.event, s.at, got, s.want)
				}
				if w := m.Wake(); s.want == Wait && !w.After(at(s.at)) {
					t.Fatalf("step %d: wake %s is not after %s", i, w.Sub(t0), s.at)
				}
			}
		})
	}
}

func TestMachine_DeadlineComesBeforeTheServersExpiry(t *testing.T) {
	t0 := time.Now()
	for _, ttl := range []time.Duration{time.Second, 2 * time.Second, 10 * time.Second, time.Minute, time.Hour} {
		for _, grace := range []time.Duration{0, time.Second, 10 * time.Second, time.Hour} {
			m := New(ttl, grace, t0)
			// The work gets SIGKILL at Deadline + StopBudget: still before
			// the server could expire the key (sent + TTL).
			if end := m.Deadline().Add(m.StopBudget()); !end.Before(t0.Add(ttl)) {
				t.Errorf("ttl %s grace %s: work ends at %s, the server may expire at %s", ttl, grace, end.Sub(t0), ttl)
			}
			// And a renewal gets at least three attempts before the deadline:
			// the scheduled one and retries.
			attempts := 1 + int(m.Deadline().Sub(t0.Add(m.Interval()))/m.RetryInterval())
			if attempts < 3 {
				t.Errorf("ttl %s grace %s: deadline %s leaves %d attempts", ttl, grace, m.Deadline().Sub(t0), attempts)
			}
		}
	}
}

func TestRun_StopsOnLossDeadlineOrContext(t *testing.T) {
	errLost := errors.New("lost")
	isLost := func(err error) bool { return errors.Is(err, errLost) }

	// Renewals that succeed keep it going until ctx ends.
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, New(300*time.Millisecond, 0, time.Now()), func(context.Context) error {
			if n.Add(1) == 3 {
				cancel()
			}
			return nil
		}, isLost, nil)
	}()
	if err := <-done; err != nil || n.Load() < 3 {
		t.Errorf("run with good renewals: %v after %d renewals, want nil after 3", err, n.Load())
	}

	// A renewal that finds the key lost ends it with that error.
	err := Run(context.Background(), New(300*time.Millisecond, 0, time.Now()), func(context.Context) error { return errLost }, isLost, nil)
	if !errors.Is(err, errLost) {
		t.Errorf("run with a lost key: %v", err)
	}

	// Renewals that keep failing end it at the deadline, before the TTL.
	start := time.Now()
	err = Run(context.Background(), New(time.Second, 0, start), func(context.Context) error { return errors.New("unreachable") }, isLost, nil)
	if !errors.Is(err, ErrDeadline) || time.Since(start) >= time.Second {
		t.Errorf("run with failing renewals: %v after %s, want ErrDeadline before the 1s TTL", err, time.Since(start))
	}
}

func TestRun_ObservesEachAnsweredRenewal(t *testing.T) {
	errLost := errors.New("lost")
	transient := errors.New("timeout")
	isLost := func(err error) bool { return errors.Is(err, errLost) }
	var n int
	var seen []error
	var took []time.Duration
	err := Run(context.Background(), New(time.Second, 0, time.Now()), func(context.Context) error {
		n++
		switch n {
		case 1:
			time.Sleep(20 * time.Millisecond) // a slow answer: its time is observed
			return nil
		case 2:
			return transient
		case 3:
			return nil
		default:
			return errLost
		}
	}, isLost, func(d time.Duration, err error) {
		took = append(took, d)
		seen = append(seen, err)
	})
	if !errors.Is(err, errLost) {
		t.Fatalf("run: %v, want the loss", err)
	}
	want := []error{nil, transient, nil, errLost}
	if len(seen) != len(want) {
		t.Fatalf("observed %v, want %v", seen, want)
	}
	for i := range want {
		if !errors.Is(seen[i], want[i]) && seen[i] != want[i] {
			t.Errorf("renewal %d observed %v, want %v", i+1, seen[i], want[i])
		}
	}
	if took[0] < 20*time.Millisecond {
		t.Errorf("the first renewal took at least 20ms, observed %s", took[0])
	}

	// A renewal that succeeds as ctx ends is observed.
	ctx, cancel := context.WithCancel(context.Background())
	var succeeded int
	err = Run(ctx, New(300*time.Millisecond, 0, time.Now()), func(context.Context) error {
		cancel()
		return nil
	}, isLost, func(_ time.Duration, err error) {
		if err == nil {
			succeeded++
		}
	})
	if err != nil || succeeded != 1 {
		t.Errorf("a renewal that succeeded as ctx ended: run %v, observed %d successes, want nil and 1", err, succeeded)
	}

	// A renewal cut short by the end of ctx is not an answer.
	ctx, cancel = context.WithCancel(context.Background())
	var observed int
	err = Run(ctx, New(300*time.Millisecond, 0, time.Now()), func(context.Context) error {
		cancel()
		return context.Canceled
	}, isLost, func(time.Duration, error) { observed++ })
	if err != nil || observed != 0 {
		t.Errorf("a renewal cut short by ctx: run %v, observed %d times, want nil and none", err, observed)
	}
}
