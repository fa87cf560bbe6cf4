package queue

import (
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
)

func TestConfig_ValidateSaysTheRule(t *testing.T) {
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Queue = "a.b" }, "queue name"},
		{func(c *Config) { c.Queue = "" }, "queue name"},
		{func(c *Config) { c.MaxActive = -1 }, "max_active"},
		{func(c *Config) { c.MaxActive = MaxActiveLimit + 1 }, "max_active"},
		{func(c *Config) { c.PerKey = 0 }, "per_key"},
		{func(c *Config) { c.MaxAttempts = 0 }, "max_attempts"},
		{func(c *Config) { c.Timeout = 0 }, "timeout"},
		{func(c *Config) { c.Backoff = -1 }, "backoff"},
		{func(c *Config) { c.TTL = Duration(1500 * time.Millisecond) }, "whole number of seconds"},
		{func(c *Config) { c.Retention = 0 }, "retention"},
		{func(c *Config) { c.SlotPrefix = ".x" }, "slot_prefix"},
		{func(c *Config) { c.SlotPrefix = "a b" }, "slot_prefix"},
	} {
		cfg := DefaultConfig("q")
		c.change(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config %+v: %v, want ErrInvalid naming %q", cfg, err, c.want)
		}
	}
	if err := DefaultConfig("q").Validate(); err != nil {
		t.Fatalf("the default config: %v", err)
	}
}

func TestValidateKey_CountsThePrefixAndLanes(t *testing.T) {
	cfg := DefaultConfig("q")
	cfg.SlotPrefix, cfg.PerKey = strings.Repeat("p", 60), 12
	if err := ValidateKey(cfg, strings.Repeat("k", 68)); err != nil { // 60+68 = 128: lane 0 fits ...
		if !strings.Contains(err.Error(), "slot") {
			t.Fatalf("%v", err)
		}
	} else {
		t.Fatal("a key whose last lane's slot (.11) is longer than 128 was accepted")
	}
	if err := ValidateKey(cfg, strings.Repeat("k", 65)); err != nil {
		t.Fatalf("a key whose slots all fit: %v", err)
	}
}

func TestConfig_Backoff_DoublesUpToTheMax(t *testing.T) {
	cfg := DefaultConfig("q")
	cfg.Backoff = Duration(10 * time.Second)
	for n, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 20: MaxBackoff} {
		if got := cfg.backoff(n); got != want {
			t.Errorf("backoff after attempt %d: %s, want %s", n, got, want)
		}
	}
	cfg.Backoff = 0
	if got := cfg.backoff(5); got != 0 {
		t.Errorf("backoff 0: %s", got)
	}
}

// settle is the task's state machine at the end of an attempt.
func TestSettle(t *testing.T) {
	cfg := DefaultConfig("q")
	cfg.MaxAttempts, cfg.Backoff = 3, Duration(time.Second)
	active := func(attempts int, cancel bool) *Task {
		return &Task{ID: "t", Queue: "q", Key: "k", State: StateActive, Attempts: attempts, CancelRequested: cancel,
			Run: &Run{Attempt: attempts, Slot: "k", Fence: 42, Host: "h", PID: 7, Instance: "i", Claimed: 9}}
	}
	for _, c := range []struct {
		name     string
		t        *Task
		o        outcome
		state    State
		attempts int
		retry    time.Duration
	}{
		{"exit 0", active(1, false), exitOutcome(0), StateDone, 1, 0},
		{"exit 0 though cancel was asked", active(1, true), exitOutcome(0), StateDone, 1, 0},
		{"exit 3", active(1, false), exitOutcome(3), StateFailed, 1, time.Second},
		{"exit 3, second attempt", active(2, false), exitOutcome(3), StateFailed, 2, 2 * time.Second},
		{"exit 3, last attempt", active(3, false), exitOutcome(3), StateDead, 3, 0},
		{"timeout", active(1, false), outcome{reason: ReasonTimeout}, StateFailed, 1, time.Second},
		{"lost", active(1, false), outcome{reason: ReasonLost}, StatePending, 1, 0},
		{"lost, last attempt", active(3, false), outcome{reason: ReasonLost}, StateDead, 3, 0},
		{"released", active(2, false), outcome{reason: ReasonReleased}, StatePending, 2, 0},
		{"drained", active(3, false), outcome{reason: ReasonDrained, giveBack: true}, StatePending, 2, 0},
		{"start failed", active(1, false), outcome{reason: ReasonStartFailed, giveBack: true}, StatePending, 0, 0},
		{"cancelled", active(1, true), outcome{reason: ReasonCancelled}, StateCancelled, 1, 0},
		{"lost while cancel asked", active(1, true), outcome{reason: ReasonLost}, StateCancelled, 1, 0},
	} {
		ended := time.Unix(100, 0)
		n := settle(cfg, c.t, c.o, ended)
		if n.State != c.state || n.Attempts != c.attempts || time.Duration(n.RetryAfter) != c.retry {
			t.Errorf("%s: %s, %d attempts, retry after %s; want %s, %d, %s", c.name, n.State, n.Attempts, n.RetryAfter, c.state, c.attempts, c.retry)
		}
		r := n.Result
		if n.Run != nil || r == nil || r.Fence != 42 || r.Host != "h" || r.Claimed != 9 || r.Reason != c.o.reason || !r.EndedAt.Equal(ended) {
			t.Errorf("%s: run %+v, result %+v", c.name, n.Run, r)
		}
		if c.t.State != StateActive || c.t.Run == nil {
			t.Errorf("%s: settle changed the task it was given", c.name)
		}
	}
}

// A task given back because its paths were held waits a second, twice as
// long each time in a row, up to 30 s; a delay it was added with is spent
// by any attempt.
func TestSettle_PathsHeldWaitsLongerEachTime(t *testing.T) {
	cfg := DefaultConfig("q")
	held := outcome{reason: ReasonPathsHeld, giveBack: true, wait: pathsHeldWait}
	task := &Task{ID: "t", Queue: "q", Key: "k", State: StateActive, Attempts: 1, Delay: Duration(time.Hour), Run: &Run{Attempt: 1, Slot: "k", Fence: 1}}
	var waits []time.Duration
	for range 7 {
		n := settle(cfg, task, held, time.Unix(100, 0))
		if n.State != StatePending || n.Attempts != 0 {
			t.Fatalf("given back as %s with %d attempts; want pending, 0", n.State, n.Attempts)
		}
		waits = append(waits, time.Duration(n.Delay))
		task = n.clone()
		task.State, task.Attempts, task.Run = StateActive, 1, &Run{Attempt: 1, Slot: "k", Fence: 1}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if n := settle(cfg, task, exitOutcome(3), time.Unix(100, 0)); n.Delay != 0 {
		t.Fatalf("after a failed attempt the delay is %s, want 0: it was spent", time.Duration(n.Delay))
	}
}

// Fields of a newer version survive a rewrite by this one.
func TestTask_KeepsUnknownFields(t *testing.T) {
	rec := []byte(`{"id":"t","queue":"q","key":"k","priority":"normal","labels":{},"payload":"aGk=","state":"pending",` +
		`"attempts":0,"seq":0,"added_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","from_the_future":{"x":1}}`)
	task, err := decodeTask("q", kv.Entry{Key: "q.task.t", Value: rec, Revision: 5})
	if err != nil {
		t.Fatal(err)
	}
	if string(task.Payload) != "hi" || task.Seq != 5 {
		t.Fatalf("payload %q seq %d", task.Payload, task.Seq)
	}
	n := task.clone()
	n.State = StateCancelled
	out, err := encodeTask(n)
	if err != nil || !bytes.Contains(out, []byte(`"from_the_future":{"x":1}`)) || !bytes.Contains(out, []byte(`"state":"cancelled"`)) {
		t.Fatalf("rewritten: %s, %v", out, err)
	}
}

func TestDecodeTask_RefusesWhatIsNotATask(t *testing.T) {
	for _, rec := range []string{
		``, `null`, `[]`, `"x"`, `{"id":"other","queue":"q"}`, `{"id":"t","queue":"r"}`,
		`{"id":"t","queue":"q","state":"running"}`, `{"id":"t","queue":"q","state":"pending","priority":"urgent"}`,
		`{"id":"t","queue":"q","state":"active"}`, `{"id":"t","queue":"q"} trailing`,
	} {
		e := kv.Entry{Key: "q.task.t", Value: []byte(rec), Revision: 1}
		index := func(q string, e kv.Entry) (*Task, error) { _, err := indexTask(q, e); return nil, err }
		for name, decode := range map[string]func(string, kv.Entry) (*Task, error){"decodeTask": decodeTask, "viewTask": viewTask, "indexTask": index} {
			if _, err := decode("q", e); err == nil {
				t.Errorf("%s accepted %q", name, rec)
			}
		}
	}
}

// FuzzDecodeTask: no record crashes the decoders; the three agree on what
// they accept and on what the view needs; what decodes encodes back to the
// same task.
func FuzzDecodeTask(f *testing.F) {
	good := &Task{ID: "t", Queue: "q", Key: "k", Priority: High, Labels: map[string]string{"p": "1"}, Payload: []byte("x"),
		State: StateActive, Attempts: 2, Seq: 3, Run: &Run{Attempt: 2, Slot: "k", Fence: 9, Claimed: 4},
		Result: &Result{Reason: ReasonLost, Claimed: 2}, RetryAfter: Duration(time.Second)}
	data, _ := encodeTask(good)
	f.Add(data)
	f.Add([]byte(`{"id":"t","queue":"q","key":"k","state":"failed","retry_after":"1s","extra":[1,2]}`))
	f.Add([]byte(`{"id":"t","queue":"q","state":"pending","priority":""}`))
	f.Fuzz(func(t *testing.T, rec []byte) {
		e := kv.Entry{Key: "q.task.t", Value: rec, Revision: 7}
		full, ferr := decodeTask("q", e)
		view, verr := viewTask("q", e)
		idx, ierr := indexTask("q", e)
		if ferr != nil {
			return // the others may be laxer about duplicate or case-folded keys; never stricter matters
		}
		if verr != nil || ierr != nil {
			t.Fatalf("decodeTask took %q but viewTask said %v and indexTask %v", rec, verr, ierr)
		}
		if !sameVersion(versionOf(view), versionOf(full)) || view.Fence() != full.Fence() {
			t.Fatalf("decoders disagree on %q: %+v vs %+v", rec, view, full)
		}
		if want := versionOf(full); !sameVersion(idx, want) {
			t.Fatalf("the view's decoder disagrees on %q: %+v vs %+v", rec, idx, want)
		}
		out, err := encodeTask(full)
		if err != nil {
			t.Fatalf("encode %+v: %v", full, err)
		}
		back, err := decodeTask("q", kv.Entry{Key: "q.task.t", Value: out, Revision: 7})
		if err != nil || back.State != full.State || !bytes.Equal(back.Payload, full.Payload) || back.Seq != full.Seq {
			t.Fatalf("round trip of %q: %+v, %v", rec, back, err)
		}
	})
}

// sameVersion compares what the view takes of two versions of a task.
func sameVersion(a, b taskVersion) bool {
	runOf := func(r *Run) Run {
		if r == nil {
			return Run{Token: -2}
		}
		return Run{Attempt: r.Attempt, Slot: r.Slot, Lane: r.Lane, Fence: r.Fence, Token: r.Token, Instance: r.Instance, Claimed: r.Claimed}
	}
	ra, rb := runOf(a.run), runOf(b.run)
	a.run, b.run = nil, nil
	a.written, b.written = time.Time{}, time.Time{}
	afterSame := slices.Equal(a.after, b.after)
	a.after, b.after = nil, nil
	return reflect.DeepEqual(a, b) && ra == rb && afterSame
}

func TestValidateName_FollowsTheRule(t *testing.T) {
	for name, ok := range map[string]bool{
		"agents": true, "A-z_09": true, strings.Repeat("q", 64): true,
		"": false, strings.Repeat("q", 65): false, "a.b": false, "a b": false, "a*": false, "a>": false,
		"ä": false, "a/b": false, "-": true, "_": true,
	} {
		err := ValidateName(name)
		if (err == nil) != ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", name, err, ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), NameRule)) {
			t.Errorf("ValidateName(%q) = %v: want ErrInvalid naming the rule", name, err)
		}
	}
}

// FuzzValidateName holds the hand-written check to the rule's regular
// expression.
func FuzzValidateName(f *testing.F) {
	rule := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	for _, s := range []string{"agents", "", "a.b", strings.Repeat("x", 64), strings.Repeat("x", 65), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := ValidateName(name) == nil, rule.MatchString(name); got != want {
			t.Fatalf("ValidateName(%q) ok=%v, the rule says %v", name, got, want)
		}
	})
}

// Only the keys baton writes are capacity tokens: a record under another
// spelling of an index is not taken for that token.
func TestTokenIndexOf_OnlyTheKeysBatonWrites(t *testing.T) {
	for key, want := range map[string]int{
		"q.cap.0": 0, "q.cap.12": 12, "q.cap.01": -1, "q.cap.+1": -1, "q.cap.-1": -1, "q.cap.": -1,
		"q.cap.x": -1, "r.cap.1": -1, "q.task.cap.1": -1,
	} {
		if got := tokenIndexOf("q", key); got != want {
			t.Errorf("tokenIndexOf(q, %q) = %d, want %d", key, got, want)
		}
	}
}
