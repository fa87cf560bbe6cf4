package queuecmd

import (
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
)

// readBatch keeps each task's line number past blank lines, and refuses,
// naming the line, what is not a task.
func TestReadBatch(t *testing.T) {
	tasks, lines, err := readBatch("q", strings.NewReader("\n{\"key\":\"a\",\"payload\":\"p\",\"id\":\"x\",\"priority\":\"high\",\"labels\":{\"l\":\"v\"}}\n\n  {\"key\":\"b\"}  \n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 || lines[0] != 2 || lines[1] != 4 {
		t.Fatalf("tasks %d on lines %v; want 2, on lines 2 and 4", len(tasks), lines)
	}
	timed, _, err := readBatch("q", strings.NewReader("{\"key\":\"a\",\"at\":\"2026-12-01T09:00:00+01:00\"}\n{\"key\":\"b\",\"in\":\"90s\"}\n"))
	if err != nil || len(timed) != 2 || len(timed[0].Options) != 1 || len(timed[1].Options) != 1 {
		t.Fatalf("lines with at and in: %+v, %v", timed, err)
	}
	if tasks[0].Key != "a" || string(tasks[0].Payload) != "p" || len(tasks[0].Options) != 3 || tasks[1].Key != "b" || tasks[1].Payload != nil {
		t.Fatalf("tasks %+v", tasks)
	}
	for _, c := range []struct{ in, want string }{
		{"{\"key\":\"a\"}\n{\"key\":\"b\",\"colour\":\"red\"}", "line 2: not a task"},
		{"{\"key\":\"a\"} {\"key\":\"b\"}", "line 1: more than one JSON value"},
		{"{\"key\":\"a\"}\n{\"key\":\n\"b\"}", "line 2: a task spans lines"},
		{"{\"key\":\"a\"}\n\n{\"key\": 7}", "line 3: not a task"},
		{"[1,2]", "line 1: not a task"},
		{"{\"payload\":\"p\"}", "line 1: \"key\" is required"},
		{"{\"key\":\"a\",\"priority\":\"urgent\"}", "high, normal or low"},
		{"{\"key\":\"a\",\"id\":\"x\"}\n\n{\"key\":\"b\",\"id\":\"x\"}", "line 3: id x is line 1's too"},
		{"\n\n", "no tasks"},
		{"{\"key\":\"a\",\"at\":\"tomorrow\"}", "\"at\" \"tomorrow\": want an RFC 3339 time"},
		{"{\"key\":\"a\",\"in\":\"soon\"}", "\"in\" \"soon\": want a duration"},
		{"{\"key\":\"a\",\"in\":\"-1s\"}", "want 0 or a positive duration"},
		{"{\"key\":\"a\",\"in\":\"1s\",\"at\":\"2026-12-01T09:00:00Z\"}", "not both"},
		{"{\"key\":\"a\",\"touches\":[\"/etc\"]}", "\"touches\": bad pattern: \"/etc\" is an absolute path: give it relative to the root (etc); nothing added"},
		{"{\"key\":\"a\",\"space\":\"app\"}", "give the paths too"},
	} {
		_, _, err := readBatch("q", strings.NewReader(c.in))
		if !errors.Is(err, cmdutil.ErrUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("readBatch(%.40q) = %v; want a usage error saying %q", c.in, err, c.want)
		}
	}
}
