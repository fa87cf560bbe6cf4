package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

// linEv is one operation of a hand-made history: invoked at call ms and
// returned at ret ms (-1: never) with outcome, rev and entry.
type linEv struct {
	key      string // default "k"
	client   string // default "c"
	op       kv.TraceOp
	value    string
	expected uint64
	ttl      time.Duration
	call     int
	ret      int
	outcome  kv.Outcome
	rev      uint64
	entry    *kv.Entry
}

func livE(rev uint64, v string) *kv.Entry {
	return &kv.Entry{Revision: rev, Op: kv.OpPut, Value: []byte(v)}
}

func delE(rev uint64, note string) *kv.Entry {
	return &kv.Entry{Revision: rev, Op: kv.OpDelete, Value: []byte(note)}
}

func expE(rev uint64) *kv.Entry { return &kv.Entry{Revision: rev, Op: kv.OpExpire} }

// linMarkerTTL is the hand-made bucket's marker TTL.
const linMarkerTTL = time.Second

// writeLinTrace writes evs as a JSON trace (kv.NewJSONTracer) into dir,
// as a caller reports its own raw operations.
func writeLinTrace(t *testing.T, dir, name string, evs []linEv) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := kv.NewJSONTracer(f)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	for i, e := range evs {
		key, client := e.key, e.client
		if key == "" {
			key = "k"
		}
		if client == "" {
			client = "c"
		}
		var value []byte
		if e.op.Write() {
			value = []byte(e.value)
		}
		id := uint64(i + 1)
		tr.Call(kv.TraceCall{Client: client, ID: id, Time: ms(e.call), Bucket: "b", Key: key, Op: e.op,
			Expected: e.expected, Value: value, TTL: e.ttl, MarkerTTL: linMarkerTTL})
		if e.ret >= 0 {
			tr.Return(kv.TraceReturn{Client: client, ID: id, Time: ms(e.ret), Outcome: e.outcome, Revision: e.rev, Entry: e.entry})
		}
	}
}

func checkLin(t *testing.T, evs []linEv) (linResult, string) {
	t.Helper()
	dir, art := t.TempDir(), filepath.Join(t.TempDir(), "artifacts")
	writeLinTrace(t, dir, "h.jsonl", evs)
	res, err := checkTraces(dir, art, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res, art
}

const (
	ok       = kv.OutcomeOK
	notFound = kv.OutcomeNotFound
	conflict = kv.OutcomeConflict
	unknown  = kv.OutcomeUnknown
)

var (
	create      = kv.TraceCreate
	createAfter = kv.TraceCreateAfter
	update      = kv.TraceUpdate
	del         = kv.TraceDelete
	get         = kv.TraceGet
	latest      = kv.TraceLatest
	put         = kv.TracePut
)

func TestLin_LegalHistoriesPass(t *testing.T) {
	for _, tc := range []struct {
		name string
		evs  []linEv
	}{
		{"concurrent CAS, one wins, the loser sees the winner", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "B", expected: 1, call: 20, ret: 40, outcome: ok, rev: 2, client: "c1"},
			{op: update, value: "C", expected: 1, call: 25, ret: 45, outcome: conflict, entry: livE(2, "B"), client: "c2"},
			{op: get, call: 50, ret: 60, outcome: ok, entry: livE(2, "B")},
			{op: del, value: "N", expected: 2, ttl: linMarkerTTL, call: 70, ret: 80, outcome: ok, rev: 3},
			{op: get, call: 81, ret: 82, outcome: notFound, entry: delE(3, "N")},
			{op: create, value: "D", call: 90, ret: 100, outcome: ok, rev: 4},
			{op: del, value: "M", expected: 4, ttl: linMarkerTTL, call: 110, ret: 120, outcome: ok, rev: 5},
			{op: createAfter, value: "E", expected: 5, call: 130, ret: 140, outcome: ok, rev: 6},
			{op: create, value: "F", call: 150, ret: 160, outcome: conflict, entry: livE(6, "E")},
		}},
		{"concurrent reads see the write before or after it", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "B", expected: 1, call: 20, ret: 60, outcome: ok, rev: 2},
			{op: get, call: 25, ret: 30, outcome: ok, entry: livE(2, "B"), client: "r1"},
			{op: latest, call: 30, ret: 40, outcome: ok, entry: livE(1, "A"), client: "r2"},
		}},
		{"a write of unknown outcome, later observed", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "B", expected: 1, call: 20, ret: 30, outcome: unknown},
			{op: get, call: 40, ret: 50, outcome: ok, entry: livE(5, "B")},
			{op: update, value: "C", expected: 5, call: 60, ret: 70, outcome: ok, rev: 6},
			{op: update, value: "D", expected: 6, call: 80, ret: -1, client: "killed"},
			{op: get, call: 100, ret: 110, outcome: ok, entry: livE(9, "D")},
		}},
		{"a write of unknown outcome, never observed", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "B", expected: 1, call: 20, ret: 30, outcome: unknown},
			{op: create, value: "X", call: 25, ret: -1, client: "killed"},
			{op: get, call: 40, ret: 50, outcome: ok, entry: livE(1, "A")},
			{op: update, value: "C", expected: 1, call: 60, ret: 70, outcome: ok, rev: 3},
			{op: get, call: 80, ret: 90, outcome: ok, entry: livE(3, "C")},
		}},
		{"a write of unknown outcome that landed and was replaced unseen", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "B", expected: 1, call: 20, ret: 30, outcome: unknown},
			{op: update, value: "C", expected: 1, call: 40, ret: 50, outcome: conflict, entry: livE(7, "R"), client: "c2"},
			{op: put, value: "R", call: 35, ret: -1, client: "harness"},
		}},
		{"a write of unknown outcome applied long after its call returned", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "B", expected: 1, call: 20, ret: 30, outcome: unknown},
			{op: get, call: 40, ret: 50, outcome: ok, entry: livE(1, "A")},
			{op: get, call: 100, ret: 110, outcome: ok, entry: livE(5, "B")},
		}},
		{"an update expecting the revision of a write of unknown outcome that only a watch saw", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "B", expected: 1, call: 20, ret: 30, outcome: unknown},
			{op: update, value: "C", expected: 5, call: 40, ret: 50, outcome: ok, rev: 6},
			{op: get, call: 60, ret: 70, outcome: ok, entry: livE(6, "C")},
		}},
		{"expiry after the TTL, then a create over the marker", []linEv{
			{op: create, value: "A", ttl: time.Second, call: 0, ret: 10, outcome: ok, rev: 1},
			{op: get, call: 500, ret: 510, outcome: ok, entry: livE(1, "A")},
			{op: get, call: 1005, ret: 1010, outcome: notFound, entry: expE(2)},
			{op: latest, call: 1500, ret: 1510, outcome: ok, entry: expE(2)},
			{op: create, value: "B", call: 1600, ret: 1610, outcome: ok, rev: 3},
			{op: get, call: 1700, ret: 1710, outcome: ok, entry: livE(3, "B")},
		}},
		{"a tombstone followed, once its TTL ran out, by an expiry marker", []linEv{
			{key: "k3", op: create, value: "A", ttl: time.Second, call: 0, ret: 10, outcome: ok, rev: 1},
			{key: "k3", op: del, value: "N", expected: 1, ttl: linMarkerTTL, call: 20, ret: 30, outcome: ok, rev: 2},
			{key: "k3", op: latest, call: 5000, ret: 5010, outcome: ok, entry: expE(9)},
		}},
		{"a renewal restarts the TTL", []linEv{
			{op: create, value: "A", ttl: time.Second, call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "A2", expected: 1, ttl: time.Second, call: 800, ret: 810, outcome: ok, rev: 2},
			{op: get, call: 1500, ret: 1510, outcome: ok, entry: livE(2, "A2")},
			{op: get, call: 1900, ret: 1910, outcome: notFound, entry: expE(3)},
		}},
		{"an expired value's marker gone after the marker TTL", []linEv{
			{key: "k2", op: create, value: "A", ttl: time.Second, call: 0, ret: 10, outcome: ok, rev: 1},
			{key: "k2", op: latest, call: 2100, ret: 2110, outcome: notFound},
			{key: "k2", op: create, value: "B", call: 2200, ret: 2210, outcome: ok, rev: 7},
		}},
		{"a tombstone gone after the marker TTL", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: del, value: "N", expected: 1, ttl: linMarkerTTL, call: 20, ret: 30, outcome: ok, rev: 2},
			{op: latest, call: 1000, ret: 1010, outcome: ok, entry: delE(2, "N")},
			{op: latest, call: 1200, ret: 1210, outcome: notFound},
			{op: create, value: "B", call: 1300, ret: 1310, outcome: ok, rev: 3},
		}},
		{"garbage written raw, and a raw conditional delete", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: put, value: "G", call: 20, ret: 30, outcome: ok, rev: 2, client: "harness"},
			{op: get, call: 40, ret: 50, outcome: ok, entry: livE(2, "G")},
			{op: update, value: "B", expected: 1, call: 60, ret: 70, outcome: conflict, entry: livE(2, "G")},
			{op: update, value: "B", expected: 2, call: 80, ret: 90, outcome: ok, rev: 3},
			{op: del, value: "", expected: 3, call: 100, ret: 110, outcome: ok, rev: 4, client: "harness"},
			{op: put, value: "H", call: 105, ret: 115, outcome: unknown, client: "harness"},
			{op: get, call: 120, ret: 130, outcome: notFound, entry: delE(4, "")},
			{op: get, call: 140, ret: 150, outcome: ok, entry: livE(6, "H")},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, art := checkLin(t, tc.evs)
			if res.NotLinearizable != 0 || res.TimedOut != 0 || res.Linearizable != res.Histories || res.Histories == 0 {
				t.Errorf("%s; failures %v", res, res.Failures)
			}
			if _, err := os.Stat(art); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a legal history wrote artifacts: %v", err)
			}
		})
	}
}

func TestLin_IllegalHistoriesFailWithTheirVisualization(t *testing.T) {
	for _, tc := range []struct {
		name string
		evs  []linEv
	}{
		{"a stale read after a newer acknowledged write", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "B", expected: 1, call: 20, ret: 30, outcome: ok, rev: 2},
			{op: get, call: 40, ret: 50, outcome: ok, entry: livE(1, "A")},
		}},
		{"two creates both acknowledged", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: create, value: "B", call: 20, ret: 30, outcome: ok, rev: 2, client: "c2"},
		}},
		{"two concurrent creates both acknowledged", []linEv{
			{op: create, value: "A", call: 0, ret: 30, outcome: ok, rev: 1},
			{op: create, value: "B", call: 5, ret: 25, outcome: ok, rev: 2, client: "c2"},
		}},
		{"an update acknowledged against a revision already replaced", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "B", expected: 1, call: 20, ret: 30, outcome: ok, rev: 2},
			{op: update, value: "C", expected: 1, call: 40, ret: 50, outcome: ok, rev: 3, client: "c2"},
		}},
		{"a conflict while the condition held", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "B", expected: 1, call: 20, ret: 30, outcome: conflict},
		}},
		{"expiry observed before the TTL", []linEv{
			{op: create, value: "A", ttl: 5 * time.Second, call: 0, ret: 10, outcome: ok, rev: 1},
			{op: get, call: 1000, ret: 1010, outcome: notFound, entry: expE(2)},
		}},
		{"a renewed value expiring on its first TTL", []linEv{
			{op: create, value: "A", ttl: time.Second, call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "A2", expected: 1, ttl: time.Second, call: 800, ret: 810, outcome: ok, rev: 2},
			{op: get, call: 1100, ret: 1110, outcome: notFound, entry: expE(3)},
		}},
		{"an expiry marker over a tombstone before the tombstone's TTL ran out", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: del, value: "N", expected: 1, ttl: linMarkerTTL, call: 20, ret: 30, outcome: ok, rev: 2},
			{op: latest, call: 500, ret: 510, outcome: ok, entry: expE(9)},
		}},
		{"a tombstone gone before the marker TTL", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: del, value: "N", expected: 1, ttl: linMarkerTTL, call: 20, ret: 30, outcome: ok, rev: 2},
			{op: latest, call: 500, ret: 510, outcome: notFound},
		}},
		{"a create of unknown outcome seen before the value in its way expired", []linEv{
			{op: create, value: "A", ttl: time.Second, call: 0, ret: 10, outcome: ok, rev: 1},
			{op: create, value: "B", ttl: time.Second, call: 20, ret: 30, outcome: unknown, client: "c2"},
			{op: get, call: 40, ret: 50, outcome: ok, entry: livE(3, "B")},
		}},
		{"a write of unknown outcome applied after its revision was replaced", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: update, value: "B", expected: 1, call: 20, ret: 30, outcome: unknown},
			{op: update, value: "C", expected: 1, call: 40, ret: 50, outcome: ok, rev: 2, client: "c2"},
			{op: get, call: 60, ret: 70, outcome: ok, entry: livE(3, "B")},
		}},
		{"a read of a value no one wrote", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: get, call: 20, ret: 30, outcome: ok, entry: livE(1, "Z")},
		}},
		{"a value with no TTL expiring", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
			{op: get, call: 100000, ret: 100010, outcome: notFound, entry: expE(2)},
		}},
		{"a revision that went back", []linEv{
			{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 5},
			{op: update, value: "B", expected: 5, call: 20, ret: 30, outcome: ok, rev: 3},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, art := checkLin(t, tc.evs)
			if res.NotLinearizable != 1 || res.Histories != 1 || len(res.Failures) != 1 {
				t.Fatalf("%s; failures %v", res, res.Failures)
			}
			path := filepath.Join(art, "lin-b-k.html")
			if !strings.HasPrefix(res.Failures[0], "b/k: ") || !strings.Contains(res.Failures[0], path) {
				t.Errorf("failure %q does not name the key and %s", res.Failures[0], path)
			}
			html, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(html), "<html") {
				t.Errorf("visualization %s: %v", path, err)
			}
		})
	}
}

// Writes of unknown outcome that no read saw and whose window cannot be
// bounded (creates while the key is live) leave porcupine many orders to
// try before it can call a history illegal: past the timeout the key is
// counted as timed out, not as linearizable.
func TestLin_UndecidedInTimeIsTimedOut(t *testing.T) {
	evs := []linEv{{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1}}
	for i := range 40 {
		evs = append(evs, linEv{op: create, value: fmt.Sprint("X", i), call: 20 + i, ret: -1, client: fmt.Sprint("killed", i)})
	}
	evs = append(evs,
		linEv{op: update, value: "B", expected: 1, call: 100, ret: 110, outcome: ok, rev: 2},
		linEv{op: get, call: 120, ret: 130, outcome: ok, entry: livE(1, "A")})
	dir, art := t.TempDir(), t.TempDir()
	writeLinTrace(t, dir, "h.jsonl", evs)
	res, err := checkTraces(dir, art, 300*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.TimedOut != 1 || res.Linearizable != 0 || res.NotLinearizable != 0 || len(res.Failures) != 1 || !strings.Contains(res.Failures[0], "b/k: not decided") {
		t.Errorf("%s; failures %v; want b/k named as not decided", res, res.Failures)
	}
}

func TestLin_KeysAreCheckedApartAndCountsAddUp(t *testing.T) {
	dir, art := t.TempDir(), t.TempDir()
	writeLinTrace(t, dir, "1.jsonl", []linEv{
		{key: "good", op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
		{key: "good", op: update, value: "B", expected: 1, call: 20, ret: 30, outcome: unknown},
		{key: "good", op: get, call: 40, ret: 50, outcome: kv.OutcomeFailed},
		{key: "good", op: update, value: "B", expected: 1, call: 60, ret: 70, outcome: kv.OutcomeFailed},
	})
	writeLinTrace(t, dir, "2.jsonl", []linEv{
		{key: "bad", op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 2},
		{key: "bad", op: get, call: 20, ret: 30, outcome: notFound},
		{key: "good", op: create, value: "C", call: 30, ret: -1},
	})
	if err := os.WriteFile(filepath.Join(dir, "ignored.txt"), []byte("not a trace"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := checkTraces(dir, art, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := linResult{Histories: 2, Linearizable: 1, NotLinearizable: 1, Ops: 5, Unknown: 2}
	res.Failures, want.Failures = nil, nil
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("got %+v, want %+v", res, want)
	}
}

func TestLin_BrokenTracesAreErrors(t *testing.T) {
	for name, content := range map[string]string{
		"a return without its call": `{"ev":"return","client":"c","id":1,"t":"2026-01-01T00:00:00Z","outcome":"ok"}` + "\n",
		"garbage mid-file":          "{\n" + `{"ev":"call","client":"c","id":1,"t":"2026-01-01T00:00:00Z","bucket":"b","key":"k","op":"get"}` + "\n",
		"an acknowledged write without its revision": `{"ev":"call","client":"c","id":1,"t":"2026-01-01T00:00:00Z","bucket":"b","key":"k","op":"create","value":"x:0"}` + "\n" +
			`{"ev":"return","client":"c","id":1,"t":"2026-01-01T00:00:01Z","outcome":"ok"}` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "t.jsonl"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := checkTraces(dir, t.TempDir(), time.Second, nil); err == nil {
				t.Error("checkTraces accepted it")
			}
		})
	}
	// A torn last line (a process killed while writing it) is not an error.
	dir := t.TempDir()
	torn := `{"ev":"call","client":"c","id":1,"t":"2026-01-01T00:00:00Z","bucket":"b","key":"k","op":"create","value":"x:0"}` + "\n" + `{"ev":"ret`
	if err := os.WriteFile(filepath.Join(dir, "t.jsonl"), []byte(torn), 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err := checkTraces(dir, t.TempDir(), time.Second, nil); err != nil || res.Unknown != 1 || res.Linearizable != 1 {
		t.Errorf("torn trace: %+v, %v", res, err)
	}
}

// Clients CAS the same keys through a real nats-server, each tracing into
// a file of its own, as baton processes do; every key's history must be
// linearizable.
func TestLin_TracedClientsOfARealServerAreLinearizable(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t)
	dir, art := t.TempDir(), t.TempDir()
	cfg := kv.BucketConfig{Name: "lin", MarkerTTL: time.Minute}
	if _, err := kvtest.Connect(t, s.ClientURL()).Ensure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	keys := []string{"k0", "k1", "short-lived"}
	const workers, rounds = 4, 40
	var wg sync.WaitGroup
	for w := range workers {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("w%d.jsonl", w)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		b := kvtest.Connect(t, s.ClientURL(), kv.WithTracer(kv.NewJSONTracer(f))).Bucket(cfg)
		rng := rand.New(rand.NewPCG(uint64(w), 7))
		wg.Go(func() {
			for i := range rounds {
				key := keys[rng.IntN(len(keys))]
				var ttl time.Duration
				if key == "short-lived" {
					ttl = time.Second
				}
				value := fmt.Appendf(nil, `{"writer":%d,"round":%d}`, w, i)
				e, err := b.Latest(ctx, key)
				switch {
				case errors.Is(err, kv.ErrNotFound):
					_, _ = b.Create(ctx, key, value, ttl)
				case err != nil:
					t.Errorf("latest: %v", err)
					return
				case !e.Live():
					_, _ = b.CreateAfter(ctx, key, value, ttl, e.Revision)
				case rng.IntN(4) == 0:
					_, _ = b.DeleteRevision(ctx, key, e.Revision, value)
				default:
					_, _ = b.Update(ctx, key, value, ttl, e.Revision)
				}
				if _, err := b.Get(ctx, key); err != nil && !errors.Is(err, kv.ErrNotFound) {
					t.Errorf("get: %v", err)
				}
			}
		})
	}
	wg.Wait()
	// Let the short-lived key expire (the server checks TTLs on a tick),
	// then read it: an expiry marker the clients never wrote.
	f, err := os.OpenFile(filepath.Join(dir, "last.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := kvtest.Connect(t, s.ClientURL(), kv.WithTracer(kv.NewJSONTracer(f))).Bucket(cfg)
	e, err := b.Latest(ctx, "short-lived")
	switch {
	case errors.Is(err, kv.ErrNotFound):
		_, err = b.Create(ctx, "short-lived", []byte("last"), time.Second)
	case err == nil && e.Live():
		_, err = b.Update(ctx, "short-lived", []byte("last"), time.Second, e.Revision)
	case err == nil:
		_, err = b.CreateAfter(ctx, "short-lived", []byte("last"), time.Second, e.Revision)
	}
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		e, err := b.Latest(ctx, "short-lived")
		if err == nil && e.Op == kv.OpExpire {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("short-lived did not expire: %+v, %v", e, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	res, err := checkTraces(dir, art, 30*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Histories != len(keys) || res.Linearizable != len(keys) || res.Ops < workers*rounds*2 {
		t.Errorf("%s; failures %v", res, res.Failures)
	}
	t.Logf("%s", res)
}

// TestLin_ReadsDuringACutAreLeftOutAndCounted: a stream leader cut off from
// the majority may answer reads from its last state (adr/0015). A stale
// read or conflict entry answered during such a window is left out of the
// history and counted as stale; the same read outside any window fails the
// check.
func TestLin_ReadsDuringACutAreLeftOutAndCounted(t *testing.T) {
	evs := []linEv{
		{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
		{op: update, value: "B", expected: 1, call: 20, ret: 30, outcome: ok, rev: 2},
		{op: get, call: 40, ret: 50, outcome: ok, entry: livE(1, "A"), client: "c2"},
		{op: createAfter, value: "C", call: 60, ret: 70, outcome: conflict, entry: livE(1, "A"), client: "c3"},
		{op: get, call: 80, ret: 90, outcome: notFound, client: "c4"}, // "none", from a leader that lacks the key
		{op: get, call: 200, ret: 210, outcome: ok, entry: livE(2, "B"), client: "c2"},
	}
	dir := t.TempDir()
	writeLinTrace(t, dir, "h.jsonl", evs)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

	res, err := checkTraces(dir, t.TempDir(), 10*time.Second, []span{{ms(35), ms(100)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.NotLinearizable != 0 || res.Linearizable != 1 || res.Exempt != 2 || res.Stale != 3 {
		t.Errorf("stale reads within a cut: got %+v, want 1 linearizable, 2 reads left out, 3 stale (the reads and the conflict's entry)", res)
	}
	res, err = checkTraces(dir, t.TempDir(), 10*time.Second, []span{{ms(100), ms(150)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.NotLinearizable != 1 || res.Exempt != 0 || res.Stale != 0 {
		t.Errorf("stale reads outside any cut: got %+v, want not linearizable and nothing left out", res)
	}
}

// TestLin_ARefusalDuringACutIsOfUnknownOutcome: a stream leader cut off
// from the majority refuses writes from its old copy while its successor
// may apply them (adr/0026). A create refused during such a window is of
// unknown outcome; the same refusal outside any window fails the check.
func TestLin_ARefusalDuringACutIsOfUnknownOutcome(t *testing.T) {
	evs := []linEv{
		{op: create, value: "A", call: 0, ret: 10, outcome: ok, rev: 1},
		{op: del, value: "bye", expected: 1, call: 20, ret: 30, outcome: ok, rev: 2},
		// The old leader still holds A: a create over the tombstone refused.
		{op: createAfter, value: "C", call: 40, ret: 50, outcome: conflict, entry: livE(1, "A"), client: "c2"},
		// Refused by the old leader naming revision 1 (older than the 2
		// expected), applied by its successor: the client traces it as
		// unknown itself.
		{op: createAfter, value: "D", expected: 2, call: 60, ret: 70, outcome: unknown, client: "c3"},
		{op: get, call: 200, ret: 210, outcome: ok, entry: livE(3, "D"), client: "c4"},
	}
	dir := t.TempDir()
	writeLinTrace(t, dir, "h.jsonl", evs)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

	res, err := checkTraces(dir, t.TempDir(), 10*time.Second, []span{{ms(35), ms(100)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.NotLinearizable != 0 || res.Linearizable != 1 || res.Refused != 1 || res.Stale != 1 {
		t.Errorf("refusals within a cut: got %+v, want linearizable, 1 create refused taken as unknown, 1 stale entry", res)
	}
	res, err = checkTraces(dir, t.TempDir(), 10*time.Second, []span{{ms(100), ms(150)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.NotLinearizable != 1 || res.Refused != 0 {
		t.Errorf("refusals outside any cut: got %+v, want not linearizable", res)
	}
}

// A check's time is bounded by the memory a hard history's search may
// take: the limit given where memory is plenty or unknown, less where it
// is not, and never under 10 s.
func TestLinTimeoutFor(t *testing.T) {
	for _, c := range []struct {
		limit     time.Duration
		available uint64
		want      time.Duration
	}{
		{3 * time.Minute, 0, 3 * time.Minute},
		{3 * time.Minute, 1 << 40, 3 * time.Minute},
		{3 * time.Minute, 24 << 30, time.Duration(float64(24<<30) * 0.6 / linGrowth * float64(time.Second))},
		{3 * time.Minute, 1 << 30, 10 * time.Second},
		{5 * time.Second, 1 << 30, 5 * time.Second},
	} {
		if got := linTimeoutFor(c.limit, c.available); got != c.want {
			t.Errorf("limit %s, %d bytes available: %s, want %s", c.limit, c.available, got, c.want)
		}
	}
	if got := linTimeoutFor(3*time.Minute, 24<<30); got < time.Minute || got > 90*time.Second {
		t.Errorf("24 GiB available: %s, want about 74 s", got)
	}
}
