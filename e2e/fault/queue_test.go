package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// feed reports one command's life to c as qtask does: a start, writes every
// 50 ms for d, an end.
func feed(c *queueChecker, run, key, task string, fence uint64, from time.Time, d time.Duration) {
	c.event(run, "start", key, task, "qw", fence, from)
	for at := time.Duration(0); at < d; at += 50 * time.Millisecond {
		c.event(run, "write", key, task, "qw", fence, from.Add(at))
	}
	c.event(run, "end", key, task, "qw", fence, from.Add(d))
}

func (c *queueChecker) all() []*taskRun {
	var runs []*taskRun
	for _, r := range c.runs {
		runs = append(runs, r)
	}
	return runs
}

// Two commands given one pid minutes apart (pid_max wrapped) are two runs:
// neither is stretched to the other's end.
func TestQueueChecker_OnePidMinutesApartIsTwoRuns(t *testing.T) {
	c := newQueueChecker()
	t0 := time.Now()
	first, ok1 := procIDFromStat(4242, "4242 (qtask) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0")
	second, ok2 := procIDFromStat(4242, "4242 (qtask) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42100 0 0")
	if !ok1 || !ok2 || first == second {
		t.Fatalf("procIDFromStat gave %q (%v) and %q (%v): want two ids", first, ok1, second, ok2)
	}
	feed(c, first, "q6", "a0-49", 815, t0, 1200*time.Millisecond)
	// Others work the key between them, one at a time.
	feed(c, "77@500", "q6", "a1-10", 820, t0.Add(2*time.Second), time.Second)
	feed(c, "78@900", "q6", "a1-11", 830, t0.Add(4*time.Second), time.Second)
	feed(c, second, "q6", "a1-52", 846, t0.Add(7*time.Minute), 1500*time.Millisecond)
	if len(c.runs) != 4 {
		t.Fatalf("%d runs recorded, want 4", len(c.runs))
	}
	excl, over := judgeRuns(c.all(), 1)
	if len(excl) != 0 || len(over) != 0 {
		t.Errorf("runs one after another judged as violations:\n%s\n%s", strings.Join(excl, "\n"), strings.Join(over, "\n"))
	}
}

func TestQueueChecker_FindsARealOverlap(t *testing.T) {
	c := newQueueChecker()
	t0 := time.Now()
	feed(c, "10@1", "q1", "a0-1", 5, t0, time.Second)
	feed(c, "11@2", "q1", "a0-2", 6, t0.Add(600*time.Millisecond), time.Second) // q1 again, 400 ms early
	feed(c, "12@3", "q2", "a0-3", 7, t0.Add(100*time.Millisecond), time.Second)
	feed(c, "13@4", "q3", "a0-4", 8, t0.Add(200*time.Millisecond), time.Second)
	excl, over := judgeRuns(c.all(), 3)
	if len(excl) != 1 || !strings.Contains(excl[0], "queue key q1: task a0-2 (fence 6) started 400ms before task a0-1 (fence 5) stopped") {
		t.Errorf("exclusion violations %q, want one on q1", excl)
	}
	// From 600 ms to 1 s all four ran; max_active is 3.
	if len(over) != 1 || !strings.Contains(over[0], "4 commands at once") {
		t.Errorf("capacity violations %q, want one of 4 at once", over)
	}
}

// The checker takes qtask's reports over HTTP, keyed by their run id.
func TestQueueChecker_ServeHTTP(t *testing.T) {
	c := newQueueChecker()
	srv := httptest.NewServer(c)
	defer srv.Close()
	post := func(q string) int {
		resp, err := http.Post(srv.URL+"/qevent?"+q, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	t0 := time.Now().Add(-time.Minute)
	at := func(d time.Duration) string { return "&at=" + strconv.FormatInt(t0.Add(d).UnixNano(), 10) }
	if code := post("event=start&pid=4242&key=q1&task=t&fence=3&actor=qw" + at(0)); code != http.StatusBadRequest {
		t.Errorf("an event without a run: %d, want 400", code)
	}
	if code := post("event=start&run=4242@9&key=q1&task=t&fence=3&actor=qw"); code != http.StatusBadRequest {
		t.Errorf("an event without its time: %d, want 400", code)
	}
	// A write retried by TCP arrives after the end, last (the soak's case: a
	// host cut off, its command's report delivered seconds after the command
	// ended, after the task's next attempt began elsewhere): the run still
	// ended when its command said.
	for _, ev := range []struct {
		kind string
		at   time.Duration
	}{{"start", 0}, {"write", 50 * time.Millisecond}, {"end", 200 * time.Millisecond}, {"write", 100 * time.Millisecond}} {
		if code := post("event=" + ev.kind + "&run=4242@9&key=q1&task=t&fence=3&actor=qw" + at(ev.at)); code != http.StatusOK {
			t.Fatalf("%s: %d", ev.kind, code)
		}
	}
	r := c.runs["4242@9"]
	if len(c.runs) != 1 || r == nil || !r.ended || r.key != "q1" || r.fence != 3 {
		t.Fatalf("runs %+v", c.runs)
	}
	if !r.start.Equal(t0) || !r.last.Equal(t0.Add(200*time.Millisecond)) {
		t.Errorf("run from %s to %s, want the command's own times: %s to %s", r.start, r.last, t0, t0.Add(200*time.Millisecond))
	}
}

func TestProcID(t *testing.T) {
	id := procID()
	pid := strings.Split(id, "@")[0]
	if !strings.Contains(id, "@") || pid != strconv.Itoa(os.Getpid()) {
		t.Errorf("procID() = %q, want %d@<start time>", id, os.Getpid())
	}
	if got, ok := procIDFromStat(7, "7 (a) b) c) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 8239 3133440"); !ok || got != "7@8239" {
		t.Errorf("a command name with parentheses: %q, %v", got, ok)
	}
	for _, bad := range []string{"", "7 (a R 1 2", "7 (a) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 x"} {
		if got, ok := procIDFromStat(7, bad); ok {
			t.Errorf("procIDFromStat(%q) = %q, want a refusal", bad, got)
		}
	}
}
