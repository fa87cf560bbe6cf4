package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// sessionRecord is a session record of the size baton writes.
func sessionRecord(slot string) []byte {
	now := time.Now().UTC()
	b, _ := json.Marshal(session.Record{
		Slot: slot, TaskID: "bench", Host: "bench-host", PID: 123456,
		PIDStart: "22dfbb72-a18f-46a8-b78a-306df6e6b7a6:155166",
		Instance: "308c17ab-d396-4d55-ac0f-8efe4e682a8d", StartedAt: now, RenewedAt: now,
	})
	return b
}

// procRun is one finished process: its wall time and output.
type procRun struct {
	wall   time.Duration
	stdout string
	stderr string
}

func runProc(ctx context.Context, env []string, stdin []byte, name string, args ...string) (procRun, error) {
	var out bytes.Buffer
	r, err := runProcTo(ctx, &out, env, stdin, name, args...)
	r.stdout = out.String()
	return r, err
}

// lineCounter counts the lines written to it, and keeps nothing.
type lineCounter struct{ lines int }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// runProcCounting is runProc whose output is counted, not kept: for a
// listing of 100k, whose tens of megabytes a growing buffer would copy
// several times on the benchmark's side of the timing (more the more a
// side prints), the process is timed as a reader that consumes its output
// sees it.
func runProcCounting(ctx context.Context, env []string, name string, args ...string) (procRun, lineCounter, error) {
	var c lineCounter
	r, err := runProcTo(ctx, &c, env, nil, name, args...)
	return r, c, err
}

// runProcTo runs the process with its standard output going to out.
func runProcTo(ctx context.Context, out io.Writer, env []string, stdin []byte, name string, args ...string) (procRun, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	if err != nil {
		return procRun{}, fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return procRun{wall: wall, stderr: errb.String()}, nil
}

// cliSide runs one side's join, commit and close of a slot as processes.
type cliSide struct {
	steps [3]func(ctx context.Context, i int) (procRun, error)
	lat   [3]samples
}

// cliRows runs whole processes per verb: baton join/commit/close, kvfloor
// (connect and one raw KV write) and etcdctl txn doing the equivalent
// compare-and-set, interleaved (see order).
func (b *bench) cliRows(ctx context.Context) ([]row, error) {
	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := floorBucket(ctx, c, "floor-cli"); err != nil {
		return nil, err
	}
	home := mkdir(b.shm, "cli-home")
	batonEnv := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "BATON_URL=" + b.nats.url,
		"BATON_STATE_DIR=" + mkdir(b.shm, "cli-state"), "BATON_HOST_ID=cli-host"}
	plainEnv := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "ETCDCTL_API=3"}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	slot := func(i int) string { return fmt.Sprintf("cli-%s-%d", run, i) }
	// viaPeak runs the steps under peakrss, for their memory.
	viaPeak := false
	runP := func(ctx context.Context, env []string, stdin []byte, name string, args ...string) (procRun, error) {
		if viaPeak {
			name, args = b.peakrss, append([]string{name}, args...)
		}
		return runProc(ctx, env, stdin, name, args...)
	}

	baton := &cliSide{steps: [3]func(context.Context, int) (procRun, error){
		func(ctx context.Context, i int) (procRun, error) {
			return runP(ctx, batonEnv, nil, b.baton, "join", slot(i), "--task", "bench", "--ttl", "1m")
		},
		func(ctx context.Context, i int) (procRun, error) {
			return runP(ctx, batonEnv, nil, b.baton, "commit", slot(i), "-m", "renew")
		},
		func(ctx context.Context, i int) (procRun, error) {
			return runP(ctx, batonEnv, nil, b.baton, "close", slot(i))
		},
	}}
	floorRev := map[int]string{}
	subject := func(i int) string { return "$KV.floor-cli." + slot(i) }
	floorStep := func(op string) func(context.Context, int) (procRun, error) {
		return func(ctx context.Context, i int) (procRun, error) {
			args := []string{b.nats.url, op, subject(i)}
			if op != "create" {
				args = append(args, floorRev[i])
			}
			r, err := runP(ctx, plainEnv, sessionRecord(slot(i)), b.kvfloor, args...)
			floorRev[i] = strings.TrimSpace(r.stdout)
			return r, err
		}
	}
	floor := &cliSide{steps: [3]func(context.Context, int) (procRun, error){floorStep("create"), floorStep("update"), floorStep("purge")}}
	etcdRev := map[int]int64{}
	etcdStep := func(op string) func(context.Context, int) (procRun, error) {
		return func(ctx context.Context, i int) (procRun, error) {
			k := "/cli/" + slot(i)
			script := etcdctlTxn(op, k, hex.EncodeToString(sessionRecord(slot(i)))[:len(sessionRecord(slot(i)))], etcdRev[i])
			r, err := runP(ctx, plainEnv, []byte(script), b.etcdctl, "--endpoints="+b.etcd.endpoint, "-w", "json", "txn")
			if err != nil {
				return r, err
			}
			rev, ok, err := parseTxn(r.stdout)
			if err == nil && !ok {
				err = fmt.Errorf("etcdctl txn %s %s: compare failed", op, k)
			}
			etcdRev[i] = rev
			return r, err
		}
	}
	etcd := &cliSide{steps: [3]func(context.Context, int) (procRun, error){etcdStep("create"), etcdStep("update"), etcdStep("delete")}}

	sides := []*cliSide{baton, floor, etcd}
	for i := range b.cli {
		for step := range 3 {
			for _, k := range order(i, 3) {
				s := sides[k]
				r, err := s.steps[step](ctx, i)
				if err != nil {
					return nil, err
				}
				s.lat[step] = append(s.lat[step], r.wall)
			}
		}
	}
	var rows []row
	for step, verb := range []string{"join", "commit", "close"} {
		name := "cli_" + verb + "_cold"
		rows = append(rows,
			row{metric: name + " median", unit: unitDuration,
				baton: dur(baton.lat[step].median()), floor: dur(floor.lat[step].median()), etcd: dur(etcd.lat[step].median()),
				goal: []cond{toFloorAtMost(1.2)}},
			row{metric: name + " " + tail(b.cli), unit: unitDuration,
				baton: dur(baton.lat[step].p99()), floor: dur(floor.lat[step].p99()), etcd: dur(etcd.lat[step].p99())})
	}

	// Peak memory of one join per side, through peakrss (see its doc for
	// why a child's rusage cannot be read directly).
	var peaks [3]samples
	for i := b.cli; i < b.cli+rssRuns; i++ {
		viaPeak = true
		for k, s := range sides {
			r, err := s.steps[0](ctx, -1-i)
			if err != nil {
				return nil, err
			}
			kib, err := parsePeak(r.stderr)
			if err != nil {
				return nil, err
			}
			peaks[k] = append(peaks[k], time.Duration(kib<<10))
		}
		viaPeak = false
		if _, err := sides[0].steps[2](ctx, -1-i); err != nil {
			return nil, err
		}
	}
	rows = append(rows, row{metric: "rss_cli (peak of one join, median)", unit: unitBytes,
		baton: val(float64(peaks[0].median())), floor: val(float64(peaks[1].median())), etcd: val(float64(peaks[2].median())),
		goal: []cond{toEtcdAtMost(1)}})
	return rows, nil
}

// rssRuns is how many joins per side are measured for their peak memory.
const rssRuns = 5

// parsePeak reads peakrss's last line, "peakrss: N KiB".
func parsePeak(stderr string) (int64, error) {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	var kib int64
	if _, err := fmt.Sscanf(lines[len(lines)-1], "peakrss: %d KiB", &kib); err != nil {
		return 0, fmt.Errorf("no peak in %q: %w", stderr, err)
	}
	return kib, nil
}

// etcdctlTxn is the etcdctl txn script for a create (the key must not
// exist), update or delete (the key must be at revision rev).
func etcdctlTxn(op, key, value string, rev int64) string {
	var cmp, then string
	switch op {
	case "create":
		cmp = fmt.Sprintf("create(%q) = \"0\"", key)
		then = fmt.Sprintf("put %s %s", key, value)
	case "update":
		cmp = fmt.Sprintf("mod(%q) = \"%d\"", key, rev)
		then = fmt.Sprintf("put %s %s", key, value)
	default:
		cmp = fmt.Sprintf("mod(%q) = \"%d\"", key, rev)
		then = "del " + key
	}
	return cmp + "\n\n" + then + "\n\n\n"
}

// parseTxn reads etcdctl -w json txn output: the revision after the txn and
// whether its compare succeeded.
func parseTxn(out string) (rev int64, succeeded bool, err error) {
	var r struct {
		Header struct {
			Revision int64 `json:"revision"`
		} `json:"header"`
		Succeeded bool `json:"succeeded"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return 0, false, fmt.Errorf("etcdctl txn output %q: %w", out, err)
	}
	return r.Header.Revision, r.Succeeded, nil
}
