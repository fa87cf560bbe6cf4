package rate_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/limits"
	"github.com/batonhq/baton/rate"
)

// TestRefusals_AreToldOnTheirSubjectAndWaitsOnlyWhenTheyGiveUp: a refused
// Take is told (with its cost) on the limiter's refusal subject; a TakeWait
// that waits and is admitted is not a refusal, one that gives up is told
// once.
func TestRefusals_AreToldOnTheirSubjectAndWaitsOnlyWhenTheyGiveUp(t *testing.T) {
	url, ls := setup(t)
	ctx := ctxT(t)
	listener := kvtest.Connect(t, url).Conn()
	sub, err := listener.SubscribeSync(limits.RefusalSubjects(rate.DefaultPrefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := listener.Flush(); err != nil {
		t.Fatal(err)
	}
	next := func(within time.Duration) *nats.Msg {
		m, err := sub.NextMsg(within)
		if errors.Is(err, nats.ErrTimeout) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if _, err := ls.Create(ctx, "api", []rate.Limit{{Max: 5, Period: rate.Duration(300 * time.Millisecond), Per: rate.PerCost}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Take(ctx, "api", rate.WithCost(5)); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Take(ctx, "api", rate.WithCost(3)); !errors.Is(err, rate.ErrLimited) {
		t.Fatalf("a take over the limit = %v", err)
	}
	m := next(5 * time.Second)
	if m == nil || m.Subject != limits.RefusalSubject(rate.DefaultPrefix, "api") || string(m.Data) != "3" {
		t.Fatalf("the refusal notice = %+v; want cost 3 on %s", m, limits.RefusalSubject(rate.DefaultPrefix, "api"))
	}

	// Waits, then is admitted: no notice.
	if _, err := ls.TakeWait(ctx, "api", rate.WithCost(2)); err != nil {
		t.Fatal(err)
	}
	if m := next(200 * time.Millisecond); m != nil {
		t.Fatalf("an admitted wait was told as refused: %s %q", m.Subject, m.Data)
	}

	// Gives up: told once, through a handle too.
	h, err := ls.Open(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Take(ctx, rate.WithCost(4)); err != nil && !errors.Is(err, rate.ErrLimited) {
		t.Fatal(err)
	}
	for {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := h.TakeWait(short, rate.WithCost(4))
		cancel()
		if err == nil {
			continue // admitted before the deadline: the window was clear
		}
		if !errors.Is(err, rate.ErrLimited) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a wait that gives up = %v", err)
		}
		break
	}
	var costs []string
	for m := next(2 * time.Second); m != nil; m = next(200 * time.Millisecond) {
		costs = append(costs, string(m.Data))
	}
	if len(costs) == 0 || len(costs) > 2 {
		t.Fatalf("notices after a handle's refused take and a wait that gave up: %v; want one or two of cost 4", costs)
	}
	for _, c := range costs {
		if n, _ := strconv.Atoi(c); n != 4 {
			t.Fatalf("notices %v; want cost 4", costs)
		}
	}
}
