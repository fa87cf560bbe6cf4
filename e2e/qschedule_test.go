package e2e

import (
	"context"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/queue"
)

// A schedule every second, with three workers on two host ids SIGKILLed
// at random for 30 s (each replaced at once, so a worker always lives):
// every tick's task exists exactly once, with none missing from the first
// tick to the last.
func TestQueue_ScheduleTicksOnceUnderWorkerKills(t *testing.T) {
	if testing.Short() {
		t.Skip("30 s of kills")
	}
	w := newWorld(t)
	hosts := []*host{w.host("host-a"), w.host("host-b")}
	a := hosts[0]
	a.must("queue", "create", "sq", "--ttl", "2s", "--backoff", "0s")
	r := a.must("queue", "schedule", "add", "sq", "tick", "--every", "1s", "--key", "k", "--payload", "p", "--json")
	if doc := jsonOf(t, r.stdout); doc["created"] != true || doc["every"] != "1s" {
		t.Fatalf("schedule add: %s", r.stdout)
	}
	a.expect(3, []string{"queue", "schedule", "add", "sq", "tick", "--every", "2s", "--key", "k"}, "exists with other settings")
	a.expect(2, []string{"queue", "schedule", "add", "sq", "bad", "--cron", "61 * * * *", "--key", "k"}, "cron expression")
	added := time.Now()
	workers := make([]*qworker, 3)
	for i := range workers {
		workers[i] = hosts[i%2].startWorker(t, "sq", "--", "true")
	}
	kills := 0
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		time.Sleep(time.Duration(1500+rand.IntN(2000)) * time.Millisecond)
		i := rand.IntN(len(workers))
		workers[i].kill()
		kills++
		workers[i] = hosts[rand.IntN(2)].startWorker(t, "sq", "--", "true")
	}
	a.must("queue", "schedule", "rm", "sq", "tick")
	stopped := time.Now()

	qs := w.queues(t)
	snap, err := qs.Snapshot(context.Background(), "sq", queue.WithTasks())
	if err != nil {
		t.Fatal(err)
	}
	byTick := map[time.Time]string{}
	var ticks []time.Time
	for _, task := range snap.Tasks {
		if task.Schedule != "tick" {
			continue
		}
		if other, ok := byTick[task.RunAt]; ok {
			t.Errorf("tick %s added twice: %s and %s", task.RunAt, other, task.ID)
		}
		byTick[task.RunAt] = task.ID
		ticks = append(ticks, task.RunAt)
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Before(ticks[j]) })
	if len(ticks) < 25 {
		t.Fatalf("%d ticks in %s, want about 30", len(ticks), stopped.Sub(added))
	}
	for i := 1; i < len(ticks); i++ {
		if gap := ticks[i].Sub(ticks[i-1]); gap != time.Second {
			t.Errorf("ticks %s then %s: %s apart, want one a second (none missing)", ticks[i-1].Format("15:04:05"), ticks[i].Format("15:04:05"), gap)
		}
	}
	if first, last := ticks[0], ticks[len(ticks)-1]; first.Sub(added) > 3*time.Second || stopped.Sub(last) > 6*time.Second {
		t.Errorf("ticks from %s to %s; the workers ran from %s to %s", first, last, added, stopped)
	}
	if !strings.HasPrefix(byTick[ticks[0]], "tick-") {
		t.Errorf("task id %s: want tick-<time>", byTick[ticks[0]])
	}
	t.Logf("%d kills; %d ticks, each once, none missing", kills, len(ticks))
}
