package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// runInfo is what a reader needs to weigh the numbers: versions, machine
// and each side's durability.
type runInfo struct {
	Date       time.Time
	Quick      bool
	Versions   []string
	Machine    []string
	Durability []string
}

func gatherInfo(ctx context.Context, b *bench, etcdBin string) runInfo {
	info := runInfo{Date: time.Now().UTC(), Quick: b.quick}
	first := func(name string, args ...string) string {
		out, err := exec.CommandContext(ctx, name, args...).Output()
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return line
	}
	mods := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			mods[m.Path] = m.Version
		}
	}
	rev := first("git", "-C", filepath.Dir(b.baton), "describe", "--always", "--dirty")
	info.Versions = []string{
		"baton " + rev + " (" + first(b.baton, "--version") + ")",
		"nats-server " + mods["github.com/nats-io/nats-server/v2"] + " (embedded in baton up), nats.go " + mods["github.com/nats-io/nats.go"],
		first(etcdBin, "--version") + " (Debian etcd-server), " + first(b.etcdctl, "version") + ", client go.etcd.io/etcd/client/v3 " + mods["go.etcd.io/etcd/client/v3"],
		runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	}
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := "unknown"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		var kib int64
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kib); err == nil {
			mem = fmt.Sprintf("%.1f GiB", float64(kib)/(1<<20))
		}
	}
	var u unix.Utsname
	kernel := "unknown"
	if unix.Uname(&u) == nil {
		kernel = string(bytes.TrimRight(u.Release[:], "\x00"))
	}
	info.Machine = []string{
		fmt.Sprintf("%d CPUs (%s), %s memory, Linux %s", runtime.NumCPU(), cpu, mem, kernel),
		"servers' data on " + fsType(b.work) + " (" + b.work + "); host state dirs on " + fsType(b.shm),
		"everything on loopback; the machine may be shared, so compare ratios from one run, not raw numbers across runs",
	}
	info.Durability = []string{
		"baton (default): JetStream's default sync_interval, 2m: an acknowledged write is in the OS page cache, fsynced within 2 minutes",
		"baton (sync always): `baton up --sync always`: fsync before every acknowledgement",
		"etcd: its default: the raft WAL is fsynced before a write is acknowledged (etcd 3.4 has no setting to turn that off)",
		"floor: the same server and connection as the baton column it sits beside",
	}
	return info
}

func fsType(path string) string {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return "unknown"
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	default:
		return fmt.Sprintf("fs 0x%x", st.Type)
	}
}

// writeResults writes RESULTS.md: the table, what each column is, and
// the run's versions, machine and durability settings.
func writeResults(path string, rows []row, info runInfo, b *bench) error {
	var w bytes.Buffer
	met, goals := tally(rows)
	mode := "full run (`make bench`)"
	if info.Quick {
		mode = "quick run (`make bench-quick`)"
	}
	fmt.Fprintf(&w, "# baton benchmark results\n\n")
	fmt.Fprintf(&w, "Written by `e2e/bench` on %s, %s. Regenerate with `make bench`.\n\n", info.Date.Format("2006-01-02 15:04 UTC"), mode)
	writeTable(&w, rows)
	fmt.Fprintf(&w, "\nbench: %d of %d goals met\n\n", met, goals)
	w.WriteString(columnsDoc)
	fmt.Fprintf(&w, "\n## Sizes\n\n%d ops per side for acquire/renew/release and the joins beside %s; %d cold processes per verb and side; %d rounds of 50 contenders; %d × %s slices per side of renewal throughput; listings at 1k/10k/%s: %d/%d/%d per side; %d remote crashes per side, %d same-host crashes for baton and %d for etcd; %d graceful handovers per side; reservations: %d reserves and releases per side beside 1,000, %d checks per side, 200 agents for %s; queue: %d adds and %d dispatches per side (%d each after idle, and through baton queue work), %d tasks of throughput, %d waiting tasks, %d statuses of them per side; %d dashboard pages per side.\n",
		b.ops, kilo(b.scaleMax), b.cli, b.contendRounds, b.throughputRounds, b.throughputSlice, kilo(b.scaleMax), b.statusReps[1000], b.statusReps[10000], b.statusReps[b.scaleMax],
		b.failoverRemote, b.failoverSameHost, b.etcdSameHost, b.handovers, b.ops, b.cli, contentionWindow(b.quick),
		b.ops, b.dispatches, b.cliDispatches, b.queueTasks, b.pending, b.statusQReps, b.pageReps)
	for _, s := range []struct {
		title string
		lines []string
	}{{"Versions", info.Versions}, {"Machine", info.Machine}, {"Durability", info.Durability}} {
		fmt.Fprintf(&w, "\n## %s\n\n", s.title)
		for _, l := range s.lines {
			fmt.Fprintf(&w, "- %s\n", l)
		}
	}
	return os.WriteFile(path, w.Bytes(), 0o644)
}

const columnsDoc = `## What each row compares

Every latency workload interleaves the three sides op by op, cycling
through every order of them, so that all three see the same machine and
each runs after each other equally often (a side runs slower right after
etcd, whose fsyncs and background commits keep the machine busy a little
longer). Medians and p99s are nearest-rank.

- **acquire, renew, release**: the library on one connection, a fresh key per
  round. baton: ` + "`Leases.TryAcquire`" + ` (1 min TTL), ` + "`Lease.Renew`" + `, ` + "`Lease.Release`" + `.
  Floor: nats.go's KV ` + "`Create`" + ` (with a per-key TTL) and ` + "`Delete`" + ` at the revision,
  and for renew the CAS publish with ` + "`Nats-TTL`" + ` (KV ` + "`Update`" + ` cannot carry a per-key
  TTL), same bytes, same bucket shape. etcd: ` + "`concurrency.Mutex.TryLock`" + ` and
  ` + "`Unlock`" + ` on a session made once, and renew as one keep-alive on an open
  LeaseKeepAlive stream (what a session's keep-alive sends; etcd does not
  write it to its WAL, where baton's renewal is a compare-and-set write).
- **round_trips_***: messages the client sent per op, from the NATS
  connection's counters and, for etcd, from a gRPC stats handler.
- **reservations** (adr/0056): a space holding 1,000 live reservations of
  a pattern or two each (src/pkgN/**, docs/fileN.md, internal/modN/*.go,
  web/pageN/**), made up front by 32 handles on four hosts, a quarter on
  the benchmark's host held by eight live processes. A reserve of 5
  patterns (` + "`Spaces.TryReserve`" + `) and its release on a handle that knows the
  space, each beside the floor: one compare-and-set of a record of the
  same size with its TTL, nats.go's publish. ` + "`baton reserve check`" + ` of a
  free path as a process beside ` + "`kvfloor get`" + `, which reads the record as
  baton does (STREAM.MSG.GET) and decodes the answer. 200 agents (handles
  on four connections) reserving and releasing a path of their own over
  and over in a space of their own: changes a second, latency and the
  share of compare-and-sets lost (from the client's KV trace), beside as
  many goroutines doing a raw get and compare-and-set of one key of the
  record's size, without backoff. ` + "`-only \"reservations contention beside\"`" + `
  runs the agents beside the 1,000 instead (a minute; not in ` + "`make bench`" + `).
- **cli_*_cold**: whole processes, from fork to exit. baton: ` + "`baton join/commit/close`" + `.
  Floor: ` + "`kvfloor`" + `, a Go program that connects and does one compare-and-set
  KV write, built as baton is (static, ` + "`CGO_ENABLED=0`" + `). etcd: ` + "`etcdctl txn`" + ` with the equivalent compare (create = 0,
  mod = revision) and put or delete. ` + "`rss_cli`" + ` is the peak RSS of a join on
  each side, read through ` + "`peakrss`" + ` (a child's own rusage would count the
  benchmark's memory: Go forks with CLONE_VM); ` + "`peakrss /bin/true`" + ` reports
  about 2 MiB, the least it can see. ` + "`peakrss`" + ` drops each executable from the
  page cache first, so that a binary just built maps its pages as an old one
  does (ADR 0028).
- **contended_join_50**: 50 goroutines, each with its own connection (and,
  for baton, its own host id and state dir), released by one barrier onto
  one slot; the time until all 50 have their answer. Exactly one must win.
  Floor: KV ` + "`Create`" + `; etcd: a create-if-absent txn. A loser of baton's join
  reads who holds the slot, one round trip more: the goal is 2x the floor.
- **throughput_renew**: 32 goroutines renew 1024 sessions for fixed slices,
  sides alternating through every order (a quick run has one slice each).
  baton: ` + "`Manager.Commit`" + `; floor: the CAS publish with ` + "`Nats-TTL`" + ` (as for renew);
  etcd: a lease keep-alive plus a compare-and-set txn (a session heartbeat
  there).
- **status_***: list every session. baton: ` + "`Manager.List`" + ` (what ` + "`baton status`" + `
  reads); floor: nats.go's ` + "`WatchAll`" + ` of the same bucket; etcd: one ` + "`Get`" + ` of
  the prefix. The process rows at 100k run ` + "`baton status`" + ` and
  ` + "`baton status --json`" + ` as a user does, their output read and counted as it comes;
  floor: ` + "`kvlist`" + `, a Go program that lists the same bucket with nats.go and
  prints each key and value, decoding nothing, and for ` + "`--json`" + `
  ` + "`kvlist -json`" + `, which prints the same values as one indented JSON
  document (encoding/json's Indent of each): ` + "`--json`" + ` writes twice the
  bytes the lines do (65 MB at 100k, with the members baton adds), and a
  JSON document of the listing is what the verb is asked for. The ratio to
  the lines is reported beside it.
- **join_at_100k / join_at_0**: median join of a fresh slot beside 100k
  sessions over the median in a bucket that starts empty (it holds only
  this workload's own joins, two per op: a few thousand at the end). baton
  and the floor alternate between the two buckets op by op; etcd joins at 0
  before its 100k keys are stored and at 100k after.
- **failover_crash_***: SIGKILL of the leading ` + "`baton lead`" + ` process (at a random
  moment, up to a third of the TTL or 1 s after the follower registered)
  until the follower leads, as an observer's
  ` + "`Election.Observe`" + ` reports it. etcd: the same with processes running
  ` + "`concurrency.Election.Campaign`" + ` on a session of the same TTL. Floor (remote):
  a raw key with the same TTL, from its write to a watcher seeing it expire
  (a leader killed just after renewing). etcd has no same-host fast path: its
  same-host row is TTL-bound.
- **handover_graceful**: the leader resigns while the other contender
  campaigns, until that campaign returns (not until the resignation does:
  baton's waits to see the new leader take the lease). baton: ` + "`Term.Resign`" + ` (a handover);
  etcd: ` + "`Election.Resign`" + `; floor: a raw delete that a watcher of the key turns
  into its own create.
- **rss_up_100k**: resident memory of the servers holding 100k sessions;
  the floor column is the same ` + "`baton up`" + ` before they were stored.
- **(sync always)** rows: the same workloads on a ` + "`baton up --sync always`" + `
  server, beside the same etcd.
- **queue add**: ` + "`Queues.Add`" + ` of a 100-byte payload on a handle that knows
  the queue's config; floor: a JetStream publish of the same record to the
  same bucket shape on the same connection; etcd: a create-if-absent txn of
  it.
- **queue add --batch**: 10,000 tasks of 100-byte payloads added at once, by
  ` + "`baton queue add --batch FILE`" + ` (the whole process: start, read, connect,
  pipelined creates, one line out per task) and by the library's
  ` + "`AddBatch`" + `, in tasks a second; floor: the same records' creates
  (expected last revision 0) published asynchronously on one connection and
  awaited, by a process (kvfloor, reading the records, beside the command)
  and in process (beside the library). Sides alternate each round.
- **queue dispatch**: from ` + "`Add`" + ` to the library handler's start, on a worker
  with no task running (max_active 16, so a claim takes a capacity token as
  well as the key's lock), one task at a time; floor: the raw work of one
  dispatch back to back (the publish, its delivery by a watch, then the
  three compare-and-set writes of a claim). Back to back, then each after
  100 ms idle: on this VM an idle process's first round trip pays its CPU's
  wake-up, on both sides alike.
- **queue dispatch through baton queue work**: from ` + "`Add`" + ` to the moment the
  command of a ` + "`baton queue work`" + ` process starts (` + "`stamp`" + `, a small Go program
  that prints the time it started), each after 100 ms idle, on a queue
  with ` + "`max_active`" + ` (a claim takes a token); floor: the raw writes of
  one dispatch (as in queue dispatch), then the benchmark starting that
  program itself. Both sides pay the round trips a dispatch needs and a
  program's start (a few milliseconds on this VM); baton/floor is what the
  claim's bookkeeping and the supervisor add.
- **queue throughput**: no-op tasks all waiting at the start, on 1000 keys,
  4 workers of 4 tasks at once each (each on its own connection),
  max_active 16, from the first start to the last end; floor: 16
  goroutines doing back to back the six raw writes of a task's life (lock,
  token, task active, task done, lock gone, token gone).
- **queue throughput vs workers**: the same tasks (40k stored at the
  start, on 1000 keys, max_active 16) worked by 1, 4, 16 and 64 worker
  *processes* (` + "`qworker`" + `: the library's worker with a no-op handler, 4
  at once, its own connection; those of one host share a state
  directory), timed over 10 s once every worker has joined and 1000 more
  tasks have ended: tasks/s, and the CPU of every worker process and the
  server per 1000 tasks; floor: 16 goroutines doing the raw writes of a
  task's life, and that client's CPU and the server's. Then dispatch to
  64 idle worker processes over dispatch to one, alternating; and SIGKILL
  of the queue's dispatcher (the leader of its election) to the start of
  a task added at that moment, with four workers on the dispatcher's host
  and with four on four hosts at a 2 s TTL (worst of 5).
- **queue dispatch_at_100k / dispatch_at_0**: dispatch to a worker whose
  queue holds 100k waiting tasks (on 1000 keys whose locks are held, so
  none can run) over dispatch in an empty queue, alternating.
- **queue status of 100k**: ` + "`baton queue status --json`" + ` of that queue as a
  process; floor: ` + "`kvlist`" + ` printing the queue's records.

## Goals

A goal is met or missed by baton's own work: where a floor runs in the same
run, the goal is a ratio to it (what baton adds), and an absolute limit
stays only where nothing comparable runs (failover against the TTL) or for
memory. The library's ops may add a tenth to the KV op; where the design
lets baton beat etcd (acquire and release are one durable write, where
etcd's are a Raft round and a WAL entry; many sessions renew at once) it
must, by 2x and 3x; renew is not compared with etcd, whose keep-alive is
not written to its log.
`
