package e2e

import (
	"bufio"
	"os"
	"sort"
	"strconv"
	"strings"
)

// attempt is one run of a task as the ledger saw it.
type attempt struct {
	key, task    string
	fence        uint64
	worker       int
	start, end   int64 // unixnano; end 0 until known
	ended        bool  // an E line: it ran to its end
	attemptField string
}

// readQLedger parses the ledger into attempts, in the order they started,
// and returns the refused lines.
func readQLedger(path string) ([]*attempt, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	byFence := map[string]*attempt{}
	var out []*attempt
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), ",")
		id := p[1] + "," + p[3]
		switch p[0] {
		case "S":
			a := &attempt{key: p[1], task: p[2], attemptField: p[4]}
			a.fence, _ = strconv.ParseUint(p[3], 10, 64)
			a.worker, _ = strconv.Atoi(p[5])
			a.start, _ = strconv.ParseInt(p[6], 10, 64)
			byFence[id] = a
			out = append(out, a)
		case "E":
			if a := byFence[id]; a != nil {
				a.end, _ = strconv.ParseInt(p[4], 10, 64)
				a.ended = true
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	var rejected []string
	if b, err := os.ReadFile(path + ".rejected"); err == nil {
		rejected = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	return out, rejected, sc.Err()
}
