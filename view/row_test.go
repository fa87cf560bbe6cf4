package view

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/session"
)

// The row written member by member is byte for byte the general path's
// (the record marshalled and its members copied), which is encoding/json's
// of SessionRow's map; where it cannot be, it says so.
func TestSessionRow_WrittenDirectlyAsEncodingJSONWritesIt(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	plain := []string{"", "a", "rendering", "T-42", "host-1.example", "x y", "~!@#$%^*()"}
	tricky := []string{"é", "<b>", "a&b", `q"q`, `back\slash`, "tab\t", "\u2028", "漢字", "\x7f", "\xff"}
	str := func() string {
		var b strings.Builder
		for range rng.IntN(3) {
			if rng.IntN(40) == 0 {
				b.WriteString(tricky[rng.IntN(len(tricky))])
			} else {
				b.WriteString(plain[rng.IntN(len(plain))])
			}
		}
		return b.String()
	}
	times := []time.Time{
		{}, time.Date(2026, 11, 25, 16, 0, 0, 123456789, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 100, time.FixedZone("x", 3600)), time.Date(2026, 11, 25, 16, 0, 0, 120000000, time.UTC),
		time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 5, 5, 5, 5, 5, 5, time.FixedZone("s", 3601)),
		// The first and last years MarshalJSON writes, and the next ones.
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("y", -3600)), time.Date(0, 1, 1, 0, 30, 0, 0, time.FixedZone("z", 3600)),
	}
	now := time.Date(2026, 11, 25, 16, 0, 10, 0, time.UTC)
	fast := 0
	for round := range 3000 {
		s := &session.Session{
			Record: session.Record{
				Slot: str(), TaskID: str(), AgentID: str(), Host: str(), PID: rng.IntN(1 << 20), Instance: str(),
				Fence: rng.Uint64N(1 << 40), StartedAt: times[rng.IntN(len(times))], RenewedAt: times[rng.IntN(len(times))],
				Renewals: rng.Uint64N(1000), Message: str(), Result: str(),
			},
			Revision: rng.Uint64N(1 << 40), Written: times[rng.IntN(len(times))], TTL: time.Duration(rng.IntN(100000)) * time.Millisecond,
		}
		if rng.IntN(2) == 0 {
			s.PIDStart = str()
		}
		switch rng.IntN(3) {
		case 1:
			s.Meta = map[string]string{}
		case 2:
			s.Meta = map[string]string{str(): str(), str(): str(), "child_pid": "12"}
		}
		tm := s.Timing(now, time.Minute)
		age, left := timingMS(tm, s.TTL)
		want, werr := sessionRowGeneral(s, tm, age, left)
		got, ok := appendSessionRow(nil, s, tm, age, left)
		if !ok {
			continue
		}
		fast++
		if werr != nil {
			t.Fatalf("round %d: the general path failed (%v) where the direct one wrote %s", round, werr, got)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d:\n got %s\nwant %s", round, got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("round %d: not JSON: %s", round, got)
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, want, "    ", "  "); err != nil {
			t.Fatal(err)
		}
		laid, ok := sessionRowValue{s, now, time.Minute}.AppendIndentJSON(nil, "    ", "  ")
		if !ok || !bytes.Equal(laid, indented.Bytes()) {
			t.Fatalf("round %d: laid out (%v)\n%s\nwant\n%s", round, ok, laid, indented.Bytes())
		}
		// Any other layout too.
		indented.Reset()
		if err := json.Indent(&indented, want, "", "\t"); err != nil {
			t.Fatal(err)
		}
		if laid, ok := (sessionRowValue{s, now, time.Minute}).AppendIndentJSON(nil, "", "\t"); !ok || !bytes.Equal(laid, indented.Bytes()) {
			t.Fatalf("round %d: laid out with a tab (%v)\n%s\nwant\n%s", round, ok, laid, indented.Bytes())
		}
	}
	if fast < 500 {
		t.Errorf("only %d of 3000 rows took the direct path", fast)
	}
}
