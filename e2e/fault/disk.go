package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A full disk (adr/0034): each server's state directory, and so its store,
// is a tmpfs of its own that the harness mounts (as root). The full_disk
// fault fills one server's disk mid-run: it shrinks the tmpfs to what the
// store holds plus fillSlack and writes a file over the rest, so that
// filling costs no memory. That server's JetStream meets the full disk and
// turns itself off, and it must say so on stderr; the other two go on, and
// writes with them. After a while the harness removes the file and gives
// the tmpfs its size back; the server must say that it has room again and
// that it wants a restart, which the harness then does, as an operator
// would (SIGTERM, start), and the server must catch up. What clients saw
// meanwhile is counted: writes acknowledged, and writes that failed with
// exit 6 (saying the disk is full, or not). Nothing acknowledged may be
// lost, which the run's checks judge as for any other fault.

// diskSize is each server's tmpfs: a bound, not memory used up front (a
// tmpfs holds only what is written to it).
const diskSize = 1 << 30

// fillSlack is the room left when the tmpfs is shrunk before the filler file
// takes it: the store may grow between the two.
const fillSlack = 256 << 10

// smallDisk is the tmpfs a server's state directory is on.
type smallDisk struct {
	dir    string
	filler string
}

// mountDisks mounts a tmpfs on every server's state directory, or returns
// why it cannot (the full_disk fault is then skipped). The run's pid file
// tells a later run whether mounts it finds were left by a live run.
func (h *harness) mountDisks() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	cleanStaleDisks()
	if err := os.WriteFile(filepath.Join(h.dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return err.Error()
	}
	for _, n := range h.cl.nodes {
		if err := mountTmpfs(n.state, diskSize, 0); err != nil {
			h.unmountDisks()
			return err.Error()
		}
		n.disk = &smallDisk{dir: n.state, filler: filepath.Join(n.state, ".batonfault-filler")}
	}
	return ""
}

func mountTmpfs(dir string, size uint64, flags uintptr) error {
	err := syscall.Mount("tmpfs", dir, "tmpfs", flags|syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size))
	if err != nil {
		return fmt.Errorf("mount a tmpfs on %s: %w", dir, err)
	}
	return nil
}

// unmountDisks unmounts the servers' tmpfs, once they are stopped. When
// the run's directory is kept, each store is copied beside its mount first
// (nN.store), since a tmpfs keeps nothing.
func (h *harness) unmountDisks() {
	for _, n := range h.cl.nodes {
		if n.disk == nil {
			continue
		}
		if h.cfg.keep || h.failed {
			_ = os.CopyFS(n.state+".store", os.DirFS(n.state))
		}
		if err := syscall.Unmount(n.state, syscall.MNT_DETACH); err != nil {
			fmt.Fprintf(os.Stderr, "batonfault: unmount %s: %v\n", n.state, err)
		}
		n.disk = nil
	}
}

// cleanStaleDisks unmounts the tmpfs that a run which died without
// cleaning up left (its pid file names a process that is gone).
func cleanStaleDisks() {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	prefix := filepath.Join(os.TempDir(), "batonfault-")
	for _, line := range strings.Split(string(info), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[4], prefix) {
			continue
		}
		mnt := f[4]
		pid, err := os.ReadFile(filepath.Join(filepath.Dir(mnt), "pid"))
		if err == nil {
			if _, err := os.Stat("/proc/" + strings.TrimSpace(string(pid))); err == nil {
				continue // its run is alive
			}
		}
		_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
	}
}

// used is what the filesystem holds, in bytes.
func (d *smallDisk) used() (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.dir, &st); err != nil {
		return 0, err
	}
	return (st.Blocks - st.Bfree) * uint64(st.Bsize), nil
}

// fill leaves the disk with no room: it shrinks the tmpfs to what it holds
// plus fillSlack (again, if the store grew meanwhile) and writes the filler
// file until the disk is full. It returns what the store held.
func (d *smallDisk) fill() (uint64, error) {
	var held uint64
	for try := 0; ; try++ {
		used, err := d.used()
		if err != nil {
			return 0, err
		}
		held = used
		err = mountTmpfs(d.dir, used+fillSlack, syscall.MS_REMOUNT)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EINVAL) || try == 10 {
			return 0, err
		}
	}
	f, err := os.OpenFile(d.filler, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return held, nil
		}
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for _, n := range []int{len(buf), 1} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					return 0, fmt.Errorf("fill %s: %w", d.dir, err)
				}
				break
			}
		}
	}
	return held, nil
}

// free removes the filler and gives the tmpfs its size back.
func (d *smallDisk) free() error {
	if err := os.Remove(d.filler); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return mountTmpfs(d.dir, diskSize, syscall.MS_REMOUNT)
}

// diskResult is what one full disk showed.
type diskResult struct {
	server   string
	held     uint64        // what its store held when it filled
	saidFull bool          // the server said its disk is full
	said     time.Duration // fill -> the server says its disk is full
	full     time.Duration // how long it was full
	acked    int           // client writes acknowledged meanwhile
	refused  int           // client writes that failed with exit 6 meanwhile
	named    int           // of them, those whose message says the disk is full
	room     time.Duration // space back -> the server says it has room again
	resumed  time.Duration // space back -> restarted and every replica current
	cut      bool          // the run ended while the disk was full
	problems []string
}

// diskProblems are what a full disk's server failed to say: that its disk
// is full (within 30 s), and once it has room, that it has (within 15 s).
// A fault cut short by the run's end before the server said its disk is
// full asks neither: the disk may have been full for only a moment.
func diskProblems(server string, saidFull, saidRoom, cut bool) []string {
	if !saidFull {
		if cut {
			return nil
		}
		return []string{fmt.Sprintf("%s's disk was full for 30s and it did not say so on stderr", server)}
	}
	if !saidRoom {
		return []string{fmt.Sprintf("%s did not say within 15s that its disk has room again", server)}
	}
	return nil
}

// diskWindow counts client writes while a disk is full.
type diskWindow struct {
	from                  time.Time
	acked, refused, named int
}

// isWrite reports whether a counted operation is a client write: join,
// commit, close (CLI and library), queue add (the only queue verb the
// workload runs meanwhile).
func isWrite(verb string) bool {
	switch verb {
	case "join", "commit", "close", "queue", "lib-join", "lib-commit", "lib-close", "lib-acquire", "lib-release":
		return true
	}
	return false
}

// fullDisk fills the disk of the server leading one of the streams (any
// server if none answers), keeps it full for 8-12 s once the server said
// so, then returns the space and restarts the server when it asks for it.
func (h *harness) fullDisk(ctx context.Context) error {
	name, err := h.cl.leaderOf(ctx, streams[h.intn(len(streams))])
	i := h.cl.index(name)
	if err != nil || i < 0 {
		i = h.intn(len(h.cl.nodes))
	}
	n := h.cl.nodes[i]
	logPath := filepath.Join(h.cl.dir, n.name+".log")
	res := diskResult{server: n.name}
	offset := fileSize(logPath)

	h.stats.openDiskWindow()
	filled := time.Now()
	held, err := n.disk.fill()
	if err != nil {
		h.stats.closeDiskWindow()
		_ = n.disk.free()
		return err
	}
	res.held = held
	h.logf("full disk: %s's store (%d KiB) filled", n.name, held>>10)
	var saidRoom bool
	if at, ok := h.waitLog(ctx, logPath, offset, "is full", 30*time.Second); ok {
		res.said, res.saidFull = at.Sub(filled), true
	}
	// The run may end while the disk is full: the fault is then cut short,
	// and what the server had no time to say is not held against it.
	res.cut = ctx.Err() != nil
	if res.saidFull && !res.cut {
		sleep(ctx, h.between(8*time.Second, 12*time.Second))
	}
	offset = fileSize(logPath)
	freed := time.Now()
	err = n.disk.free()
	res.full = freed.Sub(filled)
	res.acked, res.refused, res.named = h.stats.closeDiskWindow()
	if err != nil {
		return err
	}
	h.logf("full disk: %s's space back after %s", n.name, res.full.Round(time.Millisecond))
	if res.saidFull {
		// Waited for past the run's end too: the server is put back as
		// an operator would, whatever the run's clock says.
		if at, ok := h.waitLog(context.Background(), logPath, offset, "has room again", 15*time.Second); ok {
			res.room, saidRoom = at.Sub(freed), true
		}
	}
	res.problems = diskProblems(n.name, res.saidFull, saidRoom, res.cut)
	// As its message says: restart it (stop with handoff, start).
	h.cl.terminate(i)
	if err := h.cl.start(context.Background(), i); err != nil {
		return fmt.Errorf("restart %s: %w", n.name, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !h.healthy(context.Background()) {
		if time.Now().After(deadline) {
			res.problems = append(res.problems, fmt.Sprintf("%s was not caught up 60s after its restart once its disk had room", n.name))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.resumed = time.Since(freed)
	h.logf("full disk: %s caught up %s after its space came back", n.name, res.resumed.Round(time.Millisecond))
	h.stats.diskDone(res)
	return nil
}

// waitLog waits until the log at path says what after offset; it returns
// when it saw it.
func (h *harness) waitLog(ctx context.Context, path string, offset int64, what string, within time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(within)
	for {
		if b, err := os.ReadFile(path); err == nil && int64(len(b)) > offset && bytes.Contains(b[offset:], []byte(what)) {
			return time.Now(), true
		}
		if time.Now().After(deadline) || !sleep(ctx, 50*time.Millisecond) {
			return time.Time{}, false
		}
	}
}

func fileSize(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

// diskVerdict is the full disk's part of the closing line.
func diskVerdict(skipped string, rs []diskResult) string {
	if skipped != "" {
		return "full disk SKIPPED (" + skipped + ")"
	}
	var servers []string
	var resumed time.Duration
	acked, refused, problems := 0, 0, 0
	for _, r := range rs {
		servers = append(servers, r.server)
		resumed = max(resumed, r.resumed)
		acked, refused, problems = acked+r.acked, refused+r.refused, problems+len(r.problems)
	}
	if len(rs) == 0 {
		return "full disk: none (the run ended before its turn)"
	}
	return fmt.Sprintf("full disk: %d (%s), %d writes acknowledged and %d failed with exit 6 while full, resumed within %s of the space coming back, %d problems",
		len(rs), strings.Join(servers, " "), acked, refused, resumed.Round(10*time.Millisecond), problems)
}

// String is one full disk, for the report.
func (r diskResult) String() string {
	if r.cut && !r.saidFull {
		return fmt.Sprintf("%s's store (%.1f MiB) full for %s, cut short by the run's end before it said so; %d client writes acknowledged meanwhile, %d failed with exit 6 (%d of them saying the disk is full); restarted and caught up %s after the space came back",
			r.server, float64(r.held)/(1<<20), r.full.Round(100*time.Millisecond), r.acked, r.refused, r.named, r.resumed.Round(10*time.Millisecond))
	}
	return fmt.Sprintf("%s's store (%.1f MiB) full for %s: it said so after %s; %d client writes acknowledged meanwhile, %d failed with exit 6 (%d of them saying the disk is full); room again said after %s, restarted and caught up %s after the space came back",
		r.server, float64(r.held)/(1<<20), r.full.Round(100*time.Millisecond), r.said.Round(10*time.Millisecond), r.acked, r.refused, r.named,
		r.room.Round(10*time.Millisecond), r.resumed.Round(10*time.Millisecond))
}
