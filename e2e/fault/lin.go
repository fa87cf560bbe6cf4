package main

// The linearizability check of the KV traces (adr/0026): every baton
// process of a run appends its KV calls and returns to a trace
// (BATON_KV_TRACE, kv.NewJSONTracer), the harness adds its own raw writes,
// and checkTraces checks each key's history with porcupine against a model
// of one JetStream KV key as baton configures its buckets.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/batonhq/baton/kv"
)

// linResult sums up checkTraces: how many keys' histories were checked,
// how many are linearizable, not, or could not be decided in time, how many
// operations they hold and how many of those have an unknown outcome.
// Failures names each key that is not linearizable (and the HTML file that
// shows why) or was not decided in time.
type linResult struct {
	Histories, Linearizable, NotLinearizable, TimedOut, Ops, Unknown int
	Failures                                                         []string
	// Exempt counts the reads left out of the histories because they were
	// answered while a server was cut off from the majority (the windows
	// given to checkTraces); Stale, those among them (and the conflicts'
	// entries) that returned a revision older than one another client's
	// write had been acknowledged at before the read was sent. Refused
	// counts the creates refused then, taken as of unknown outcome.
	Exempt, Stale, Refused int
	// Timeout is what each pass of one history's check was given:
	// checkTraces's timeout, or less on a machine with less memory
	// (linTimeoutFor).
	Timeout time.Duration
}

// linGrowth is how fast the search of a hard history grows its memory:
// porcupine caches every (operations linearized, state) pair it has
// tried. Histories of 4,500-5,000 operations of one key, 165-408 of them
// of unknown outcome (an hour's soak, servers killed, partitions), grew
// by 110-165 MB a second each; rounded up.
const linGrowth = 200 << 20

// linTimeoutFor bounds a check's time by the memory available: a pass
// may grow to 60% of it. Three minutes of a hard history grow to 20-30
// GB, past this machine's 24 GiB: the kernel killed the harness before
// its verdict. The histories are checked one at a time for the same
// reason.
func linTimeoutFor(limit time.Duration, available uint64) time.Duration {
	if available == 0 {
		return limit
	}
	t := time.Duration(float64(available) * 0.6 / linGrowth * float64(time.Second))
	return min(limit, max(t, 10*time.Second))
}

// memAvailable is the memory the kernel says is available (MemAvailable
// in /proc/meminfo), 0 if it cannot be read.
func memAvailable() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// linNever is the return time of a call that never returned, or of a write
// whose outcome is unknown: it may take effect at any later time.
const linNever = math.MaxInt64

// checkTraces reads every *.jsonl trace in traceDir, builds one history per
// bucket and key, and checks each with porcupine within timeout. For each
// key that is not linearizable it writes porcupine's visualization into
// artifactDir (lin-BUCKET-KEY.html).
//
// A read answered during one of the windows in cutOff (a server cut off
// from the majority, which may still answer reads as the stream leader it
// was: adr/0015) is left out of the histories. So is the entry a conflict
// carries, and a create refused then is taken as of unknown outcome: that
// server refuses writes from the same old copy while its successor may
// apply them (adr/0026), and its refusal of a create cannot be told from a
// true one. Every other write is checked whenever it was made.
func checkTraces(traceDir, artifactDir string, timeout time.Duration, cutOff []span) (linResult, error) {
	var res linResult
	files, err := filepath.Glob(filepath.Join(traceDir, "*.jsonl"))
	if err != nil {
		return res, fmt.Errorf("lin: list traces in %s: %w", traceDir, err)
	}
	t := newLinTraces()
	t.cutOff = cutOff
	for _, f := range files {
		if err := t.read(f); err != nil {
			return res, err
		}
	}
	hists, err := t.histories()
	if err != nil {
		return res, err
	}
	res.Exempt, res.Stale, res.Refused = t.exempt, t.staleReads(), t.refused
	res.Histories = len(hists)
	for _, h := range hists {
		res.Ops += len(h.ops)
		res.Unknown += h.unknown()
	}

	// One at a time: a hard history's search takes what memory it can
	// (linTimeoutFor).
	avail := memAvailable()
	res.Timeout = linTimeoutFor(timeout, avail)
	if avail > 0 {
		// The collector keeps the heap near what the search holds, not
		// twice that, as the heap nears the memory there is.
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(int64(avail * 8 / 10)))
	}
	verdicts := make([]porcupine.CheckResult, len(hists))
	for i, h := range hists {
		verdicts[i] = h.check(res.Timeout)
		if verdicts[i] != porcupine.Ok {
			runtime.GC() // what the search kept goes before the next
		}
	}

	for i, h := range hists {
		switch verdicts[i] {
		case porcupine.Ok:
			res.Linearizable++
		case porcupine.Unknown:
			res.TimedOut++
			res.Failures = append(res.Failures, fmt.Sprintf("%s/%s: not decided within %s (%d ops, %d of unknown outcome); the run's directory is kept", h.bucket, h.key, res.Timeout.Round(time.Second), len(h.ops), h.unknown()))
		default:
			res.NotLinearizable++
			path, err := h.visualize(artifactDir, res.Timeout)
			if err != nil {
				return res, err
			}
			res.Failures = append(res.Failures, fmt.Sprintf("%s/%s: not linearizable (%d ops); see %s", h.bucket, h.key, len(h.ops), path))
		}
	}
	return res, nil
}

// String is the verdict in one line.
func (r linResult) String() string {
	return fmt.Sprintf("%d keys' histories (%d ops, %d of unknown outcome): %d linearizable, %d not, %d timed out",
		r.Histories, r.Ops, r.Unknown, r.Linearizable, r.NotLinearizable, r.TimedOut)
}

// linCallID identifies a call across the traces.
type linCallID struct {
	file, client string
	id           uint64
}

type linCall struct {
	line kv.TraceLine
	ret  *kv.TraceLine
}

// linTraces are the calls read so far, in the order read.
type linTraces struct {
	calls   map[linCallID]*linCall
	order   []linCallID
	bucket  map[string]linBucket
	cutOff  []span
	exempt  int                // reads left out: answered during a cut
	refused int                // conflicts answered during a cut: unknown
	left    map[linCallID]bool // those reads and conflicts
}

// linBucket is a bucket's settings, as the traced clients knew them.
type linBucket struct{ ttl, markerTTL time.Duration }

func newLinTraces() *linTraces {
	return &linTraces{calls: map[linCallID]*linCall{}, bucket: map[string]linBucket{}}
}

// read adds one trace file's lines. A last line without its newline (the
// process was killed while writing it) is ignored if it does not decode.
func (t *linTraces) read(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("lin: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		raw, rerr := r.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			var l kv.TraceLine
			if err := json.Unmarshal(raw, &l); err != nil {
				if rerr == io.EOF {
					return nil // a torn last line
				}
				return fmt.Errorf("lin: %s line %d: %w", path, n, err)
			}
			if err := t.add(path, n, l); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("lin: read %s: %w", path, rerr)
		}
	}
}

func (t *linTraces) add(path string, n int, l kv.TraceLine) error {
	id := linCallID{path, l.Client, l.ID}
	switch l.Event {
	case "call":
		if _, dup := t.calls[id]; dup {
			return fmt.Errorf("lin: %s line %d: call %s/%d made twice", path, n, l.Client, l.ID)
		}
		if l.Bucket == "" || l.Key == "" || l.Op == "" {
			return fmt.Errorf("lin: %s line %d: a call without its bucket, key or operation", path, n)
		}
		t.calls[id] = &linCall{line: l}
		t.order = append(t.order, id)
		b := t.bucket[l.Bucket]
		b.ttl, b.markerTTL = max(b.ttl, l.BucketTTL), max(b.markerTTL, l.MarkerTTL)
		t.bucket[l.Bucket] = b
	case "return":
		c, ok := t.calls[id]
		if !ok {
			return fmt.Errorf("lin: %s line %d: return of %s/%d without its call", path, n, l.Client, l.ID)
		}
		if c.ret != nil {
			return fmt.Errorf("lin: %s line %d: call %s/%d returned twice", path, n, l.Client, l.ID)
		}
		c.ret = &l
	default:
		return fmt.Errorf("lin: %s line %d: event %q", path, n, l.Event)
	}
	return nil
}

// linHistory is one key's operations and the model to check them with.
type linHistory struct {
	bucket, key string
	ops         []porcupine.Operation
	// lean is ops without the writes of unknown outcome whose value no
	// read saw; nil when there are none.
	lean  []porcupine.Operation
	model porcupine.Model
}

// unknown counts the history's operations of unknown outcome.
func (h *linHistory) unknown() int {
	n := 0
	for _, op := range h.ops {
		if op.Output.(linOutput).Outcome == kv.OutcomeUnknown {
			n++
		}
	}
	return n
}

// check decides the history within timeout (for each of at most two
// passes). A write of unknown outcome may have been applied at any time
// after its call, so each one left pending multiplies the orders to try.
// The first pass leaves out those whose value no read saw: a history
// linearizable without them is linearizable with them (each can be
// linearized as not applied). Only if it is not is the whole history
// checked.
func (h *linHistory) check(timeout time.Duration) porcupine.CheckResult {
	if h.lean != nil {
		if porcupine.CheckOperationsTimeout(h.model, h.lean, timeout) == porcupine.Ok {
			return porcupine.Ok
		}
		runtime.GC() // the first pass's search goes before the second's
	}
	return porcupine.CheckOperationsTimeout(h.model, h.ops, timeout)
}

// bound gives writes of unknown outcome a return time where one can be
// told, and sets lean. A write whose value a read saw (a value no other
// write of the key wrote) was applied by that read's return. An Update or
// a Delete expecting revision E can apply only while E is the key's latest
// revision: not after any call returned showing a later revision, since
// revisions only grow. (No entry at all says nothing: it may come before
// E.)
func (h *linHistory) bound() {
	type revAt struct {
		rev uint64
		ret int64
	}
	var revs []revAt
	for _, op := range h.ops {
		out := op.Output.(linOutput)
		switch {
		case out.Entry != nil:
			revs = append(revs, revAt{out.Entry.Rev, out.Return})
		case out.Outcome == kv.OutcomeOK && out.Rev != 0:
			revs = append(revs, revAt{out.Rev, out.Return})
		}
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i].rev < revs[j].rev })
	for i := len(revs) - 2; i >= 0; i-- { // the earliest return showing at least revs[i].rev
		revs[i].ret = min(revs[i].ret, revs[i+1].ret)
	}
	for i, op := range h.ops {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		if out.Outcome != kv.OutcomeUnknown || in.Op != kv.TraceUpdate && in.Op != kv.TraceDelete {
			continue
		}
		j := sort.Search(len(revs), func(j int) bool { return revs[j].rev > in.Expected })
		if j < len(revs) && revs[j].ret < out.Return {
			out.Return = max(revs[j].ret, in.Call)
			h.ops[i].Output, h.ops[i].Return = out, out.Return
		}
	}

	type seen struct {
		kind  linKind
		value string
	}
	writes := map[seen]int{}
	first := map[seen]int64{}
	kindOf := func(in linInput) linKind {
		if in.Op == kv.TraceDelete {
			return linDeleted
		}
		return linLive
	}
	for _, op := range h.ops {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		if in.Op.Write() {
			writes[seen{kindOf(in), in.Value}]++
		}
		if e := out.Entry; e != nil && e.Kind != linExpired {
			k := seen{e.Kind, e.Value}
			if t, ok := first[k]; !ok || out.Return < t {
				first[k] = out.Return
			}
		}
	}
	dropped := false
	lean := make([]porcupine.Operation, 0, len(h.ops))
	for i, op := range h.ops {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		if !in.Op.Write() || out.Outcome != kv.OutcomeUnknown {
			lean = append(lean, op)
			continue
		}
		k := seen{kindOf(in), in.Value}
		t, observed := first[k]
		if !observed {
			dropped = true
			continue
		}
		if writes[k] == 1 && t < out.Return {
			out.Return = max(t, in.Call)
			h.ops[i].Output, h.ops[i].Return = out, out.Return
		}
		lean = append(lean, h.ops[i])
	}
	if dropped {
		h.lean = lean
	}
}

// histories turns the calls into one history per key, dropping what says
// nothing: failed reads, reads that never returned, and writes that
// certainly did not happen without telling why (OutcomeFailed).
func (t *linTraces) histories() ([]*linHistory, error) {
	byKey := map[[2]string]*linHistory{}
	for _, id := range t.order {
		c := t.calls[id]
		in, out, keep, err := t.operation(c)
		// Every read answered during a cut (an entry or "none": the old
		// leader may lack a key created since), and every conflict's
		// entry. A create refused then is of unknown outcome: a deposed
		// leader refuses it from its old copy, naming a revision no older
		// than the one expected (0), while its successor may apply it. (A
		// refusal of any other write that names an older revision than
		// expected gives the deposed leader away, and the client traces it
		// as unknown itself: adr/0026.)
		if keep && (!in.Op.Write() || out.Outcome == kv.OutcomeConflict) && t.during(in.Call, out.Return) {
			if t.left == nil {
				t.left = map[linCallID]bool{}
			}
			if !in.Op.Write() || out.Entry != nil {
				t.left[id] = true // counted if stale
			}
			if in.Op.Write() {
				out.Entry = nil
				if in.Expected == 0 && (in.Op == kv.TraceCreate || in.Op == kv.TraceCreateAfter) {
					out.Outcome, out.Return = kv.OutcomeUnknown, linNever
					t.refused++
				}
			} else {
				t.exempt++
				keep = false
			}
		}
		if err != nil {
			return nil, fmt.Errorf("lin: %s: call %s/%d: %w", id.file, id.client, id.id, err)
		}
		if !keep {
			continue
		}
		k := [2]string{c.line.Bucket, c.line.Key}
		h := byKey[k]
		if h == nil {
			h = &linHistory{bucket: k[0], key: k[1]}
			byKey[k] = h
		}
		h.ops = append(h.ops, porcupine.Operation{
			Input: in, Call: in.Call, Output: out, Return: out.Return,
			Metadata: fmt.Sprintf("%s %s/%d", filepath.Base(id.file), id.client, id.id),
		})
	}
	out := make([]*linHistory, 0, len(byKey))
	for _, h := range byKey {
		sort.SliceStable(h.ops, func(i, j int) bool { return h.ops[i].Call < h.ops[j].Call })
		h.bound()
		linLanes(h.ops)
		h.model = linModel(h.ops[0].Call)
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].bucket < out[j].bucket || out[i].bucket == out[j].bucket && out[i].key < out[j].key
	})
	return out, nil
}

// during reports whether [from, to] (unix ns) meets a window of cutOff.
func (t *linTraces) during(from, to int64) bool {
	for _, w := range t.cutOff {
		if from <= w.end.UnixNano() && to >= w.start.UnixNano() {
			return true
		}
	}
	return false
}

// staleReads counts the reads left out (and conflicts' entries) that
// returned a revision older than a write to the key acknowledged before
// the read was sent.
func (t *linTraces) staleReads() int {
	type ack struct {
		at  int64
		rev uint64
	}
	acks := map[[2]string][]ack{}
	for _, id := range t.order {
		c := t.calls[id]
		if c.ret != nil && c.line.Op.Write() && c.ret.Outcome == kv.OutcomeOK && c.ret.Revision > 0 {
			k := [2]string{c.line.Bucket, c.line.Key}
			acks[k] = append(acks[k], ack{c.ret.Time.UnixNano(), c.ret.Revision})
		}
	}
	n := 0
	for id := range t.left {
		c := t.calls[id]
		var seen uint64 // "none" is older than any write
		if e := c.ret.Entry; e != nil {
			seen = e.Revision
		}
		for _, a := range acks[[2]string{c.line.Bucket, c.line.Key}] {
			if a.at < c.line.Time.UnixNano() && a.rev > seen {
				n++
				break
			}
		}
	}
	return n
}

// linLanes gives each operation a ClientId such that one lane's operations
// never overlap: porcupine draws one row per ClientId.
func linLanes(ops []porcupine.Operation) {
	var free []int64 // each lane's last return
	for i := range ops {
		lane := -1
		for l, until := range free {
			if until < ops[i].Call {
				lane = l
				break
			}
		}
		if lane < 0 {
			lane = len(free)
			free = append(free, 0)
		}
		free[lane] = ops[i].Return
		ops[i].ClientId = lane
	}
}

// operation is a call as the model's input and output.
func (t *linTraces) operation(c *linCall) (linInput, linOutput, bool, error) {
	l := c.line
	b := t.bucket[l.Bucket]
	in := linInput{
		Op: l.Op, Called: l.Op, Expected: l.Expected, Value: l.Value, Call: l.Time.UnixNano(),
		TTL:       int64(minTTL(l.TTL, b.ttl)),
		MarkerTTL: int64(minTTL(b.markerTTL, b.ttl)),
	}
	switch l.Op {
	case kv.TraceLatest, kv.TraceGet, kv.TraceCreate, kv.TraceCreateAfter, kv.TraceUpdate, kv.TraceDelete, kv.TracePut:
	default:
		return in, linOutput{}, false, fmt.Errorf("operation %q", l.Op)
	}
	if l.Op == kv.TraceLatest || l.Op == kv.TraceGet {
		in.Op = kv.TraceLatest // Get's answers say as much: an entry or the marker in the way, or none
		in.Value = ""
	}
	out := linOutput{Outcome: kv.OutcomeUnknown, Return: linNever}
	if c.ret != nil {
		out.Outcome, out.Rev = c.ret.Outcome, c.ret.Revision
		out.Return = max(c.ret.Time.UnixNano(), in.Call)
		if e := c.ret.Entry; e != nil {
			out.Entry = &linEntry{Rev: e.Revision, Kind: linKindOf(e.Op), Value: e.Value}
			if out.Entry.Kind == linAbsent {
				return in, out, false, fmt.Errorf("entry of op %q", e.Op)
			}
		}
	}
	if !l.Op.Write() {
		// A read that failed, or never returned, says nothing.
		return in, out, out.Outcome == kv.OutcomeOK || out.Outcome == kv.OutcomeNotFound, nil
	}
	switch out.Outcome {
	case kv.OutcomeOK:
		if out.Rev == 0 {
			return in, out, false, errors.New("an acknowledged write without its revision")
		}
	case kv.OutcomeUnknown:
		out.Return = linNever // it may land at any time after
	case kv.OutcomeConflict:
	default:
		return in, out, false, nil // certainly not applied; nothing learnt
	}
	return in, out, true, nil
}

// minTTL is the shorter of two TTLs, 0 meaning none.
func minTTL(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// visualize writes the history's porcupine visualization into dir.
func (h *linHistory) visualize(dir string, timeout time.Duration) (string, error) {
	_, info := porcupine.CheckOperationsVerbose(h.model, h.ops, timeout)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("lin: %w", err)
	}
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator {
			return '_'
		}
		return r
	}, "lin-"+h.bucket+"-"+h.key+".html")
	path := filepath.Join(dir, name)
	if err := porcupine.VisualizePath(h.model, info, path); err != nil {
		return "", fmt.Errorf("lin: visualize %s/%s: %w", h.bucket, h.key, err)
	}
	return path, nil
}
