package reserve

import (
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/reserve/pattern"
)

// benchRecord is a space of n reservations of a pattern or two.
func benchRecord(n int) Record {
	now := time.Now().UTC()
	r := Record{Space: "repo", Writer: "rabcdef0123", WrittenAt: now}
	for i := range n {
		pats := []string{fmt.Sprintf("src/pkg%d/**", i)}
		if i%2 == 1 {
			pats = append(pats, fmt.Sprintf("docs/file%d.md", i))
		}
		r.Entries = append(r.Entries, Entry{ID: fmt.Sprintf("r%08x%04x", i, i), Patterns: pats, Agent: fmt.Sprintf("agent-%d", i), Task: fmt.Sprintf("T%d", i),
			Host: fmt.Sprintf("host-%d", i%4), PID: 100000 + i, PIDStart: "22dfbb72-a18f-46a8-b78a-306df6e6b7a6:155166", Fence: uint64(1000 + i),
			TTL: jsonrec.Duration(15 * time.Minute), Since: now, Renewed: now})
	}
	return r
}

// The steps of a reserve of 5 patterns in a space of 1,000, on a handle
// that knows the space (its entries memoised), without the write.
func BenchmarkChange_Steps(b *testing.B) {
	verifyMemos = false // what the package's tests check, the benchmark times without
	defer func() { verifyMemos = true }()
	data, err := benchRecord(1000).MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, ok := decodeRecord(data, true); !ok {
				b.Fatal("refused")
			}
		}
	})
	st, err := stateOf("repo", kvEntry(data))
	if err != nil {
		b.Fatal(err)
	}
	s := &Spaces{host: "host-0", now: time.Now, parsed: map[string]pattern.Pattern{},
		seenAlive: map[hostlocal.Process]time.Time{}, gone: map[hostlocal.Process]bool{}}
	warm := st.kept(st.at, s.deadNow())
	if _, err := s.compile(nil, &warm); err != nil {
		b.Fatal(err)
	}
	st.rec = warm
	req, err := s.newRequest("repo", []string{"src/bench/**", "docs/bench.md", "internal/bench/*.go", "cmd/bench/**", "test/bench_test.go"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("kept", func(b *testing.B) {
		for b.Loop() {
			_ = st.kept(st.at, s.deadNow())
		}
	})
	next := st.kept(st.at, s.deadNow())
	b.Run("blockers", func(b *testing.B) {
		for b.Loop() {
			if bs, err := s.blockersIn(&next, req.pats, false); err != nil || len(bs) > 0 {
				b.Fatal(bs, err)
			}
		}
	})
	next.Entries = append(next.Entries, req.entry)
	b.Run("encode", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = next.encode(buf)
		}
	})
	b.Run("recordTTL", func(b *testing.B) {
		for b.Loop() {
			_ = recordTTL(&next, st.at)
		}
	})
}
