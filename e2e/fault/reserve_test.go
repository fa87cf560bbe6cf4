package main

import (
	"strings"
	"testing"
	"time"
)

func TestJudgeResv(t *testing.T) {
	l := newResvLedger(nil)
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	hold := func(id string, fence uint64, shared bool, from, to int, pats ...string) *resvHold {
		return &resvHold{run: id, actor: "a-" + id, id: id, fence: fence, shared: shared, patterns: pats, start: at(from), last: at(to)}
	}
	for _, c := range []struct {
		name          string
		holds         []*resvHold
		clashes, bads int
		want          string
	}{
		{"apart in time", []*resvHold{hold("r1", 5, false, 0, 100, "a/**"), hold("r2", 6, false, 150, 200, "a/x/1.go")}, 0, 0, ""},
		{"disjoint paths at once", []*resvHold{hold("r1", 5, false, 0, 100, "a/**"), hold("r2", 6, false, 50, 200, "b/x")}, 0, 0, ""},
		{"two shared at once", []*resvHold{hold("r1", 5, true, 0, 100, "**/*.md"), hold("r2", 6, true, 50, 200, "a/y/2.md")}, 0, 0, ""},
		{"exclusive over shared", []*resvHold{hold("r1", 5, true, 0, 100, "**/*.md"), hold("r2", 6, false, 50, 200, "a/y")}, 1, 0, "both cover a/y/2.md"},
		{"two exclusive at once", []*resvHold{hold("r1", 5, false, 0, 100, "*/x/*.go"), hold("r2", 6, false, 99, 200, "c")}, 1, 0, "both cover c/x/1.go"},
		{"a later grant with a smaller fence", []*resvHold{hold("r1", 9, false, 0, 100, "a/x/1.go"), hold("r2", 6, false, 150, 200, "a/**")}, 0, 1, "granted fence 6 after r1"},
		{"no fence", []*resvHold{hold("r1", 0, false, 0, 100, "a/x/1.go")}, 0, 1, "without a fence"},
		{"one fence for two that do not clash", []*resvHold{hold("r1", 7, false, 0, 100, "a"), hold("r2", 7, false, 50, 200, "b")}, 0, 0, ""},
		{"one fence for two that clash", []*resvHold{hold("r1", 7, false, 0, 100, "a"), hold("r2", 7, false, 150, 200, "a/x")}, 0, 1, "granted fence 7 after r1"},
	} {
		clashes, bad := judgeResv(c.holds, l.covered)
		if len(clashes) != c.clashes || len(bad) != c.bads {
			t.Errorf("%s: clashes %q, bad %q; want %d and %d", c.name, clashes, bad, c.clashes, c.bads)
			continue
		}
		if all := strings.Join(append(clashes, bad...), "; "); !strings.Contains(all, c.want) {
			t.Errorf("%s: %q does not say %q", c.name, all, c.want)
		}
	}
}
