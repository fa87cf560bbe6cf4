package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
)

// Recovery at once on a worker's own host (adr/0020) needs someone on that
// host to see the worker's process gone. The dispatcher sees that only of
// the processes of its own host; for the others, the workers of a host
// that share a state directory watch each other:
//
//   - each worker keeps a pid file (group <prefix>.queue.<Q>, named by its id) with
//     its process and the attempts it runs: the key lock's slot and fence
//     and the capacity token of each, written hostFileEvery after a
//     change;
//   - one worker per host and queue, the holder of the state directory's
//     gate <prefix>.queue-watch.<Q>, waits for the processes of those files to exit
//     (hostlocal.WaitExit: on a pidfd in the runtime's poller on Linux, so
//     nothing wakes while they live) and reads the folder for new ones
//     every scanEvery; the others wait for its process to exit, and then
//     take the gate;
//   - a worker found dead has its locks and tokens removed by
//     compare-and-set, each only if it still names that process and the
//     process (and its command's process group) is gone, as the dispatcher
//     does on its own host; the dispatcher then sees each lock gone and
//     puts the task back at once. Its presence and inbox go, and its file.
//
// A dead dispatcher is replaced by the election: its candidates on its host
// wait for its process to exit in the same way (lease), whatever their
// state directories.
//
// An attempt not yet in its worker's file when the worker died (claimed
// less than hostFileEvery before) is recovered once its lock expires.
// hostFileEvery is short against any TTL, and a worker that dies that soon
// after a claim is rare; the claim's way to its work pays no file write.

const (
	// hostFileEvery bounds how often a worker rewrites its pid file.
	hostFileEvery = 20 * time.Millisecond
	// watchRetry is how often a worker that does not watch its host tries
	// to become the one that does besides when the watcher's process
	// exits: a watcher that stopped watching lives on as a process. Each
	// try opens the gate and the watcher's pidfd, so it is kept rare: at
	// 2s, 63 idle workers of a host spent 15 ms of CPU a second on it.
	watchRetry = 10 * time.Second
	// scanEvery is how often the watch reads the folder of pid files for
	// workers that started.
	scanEvery = 250 * time.Millisecond
)

// hostFile is a worker's pid file.
type hostFile struct {
	Queue    string    `json:"queue"`
	Worker   string    `json:"worker"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	PIDStart string    `json:"pid_start"`
	Runs     []hostRun `json:"runs"`
}

// hostRun is an attempt a worker runs, as its pid file names it.
type hostRun struct {
	Task  string `json:"task"`
	Slot  string `json:"slot"`
	Fence uint64 `json:"fence"`
	Token int    `json:"token"`
}

// hostGroup is the folder of the queue's pid files, and hostGate the gate
// of its watcher, in the state directory (the prefix keeps two
// deployments' queues of one name apart).
func (l *loop) hostGroup() string { return l.w.qs.prefix + ".queue." + l.w.q }
func (l *loop) hostGate() string  { return l.w.qs.prefix + ".queue-watch." + l.w.q }

// writeHostFile writes this worker's pid file with what it runs now.
func (l *loop) writeHostFile() error {
	sd := l.w.qs.m.StateDir()
	if sd == nil {
		return nil
	}
	f := hostFile{Queue: l.w.q, Worker: l.id, Host: l.w.qs.m.Host(), PID: l.w.qs.proc.PID, PIDStart: l.w.qs.proc.Start, Runs: []hostRun{}}
	written := make(map[string]uint64, len(l.running))
	for _, r := range l.running {
		f.Runs = append(f.Runs, hostRun{Task: r.id, Slot: r.slot, Fence: r.fence, Token: r.token})
		written[r.id] = r.fence
	}
	l.hostDue, l.hostRuns = time.Time{}, written
	return sd.WritePIDFile(l.hostGroup(), l.id, f)
}

// hostChanged notes that what this worker runs changed: the pid file is
// rewritten hostFileEvery later (off the way from a claim to its work; a
// task that ends by then costs no write).
func (l *loop) hostChanged() {
	if l.hostDue.IsZero() {
		l.hostDue = time.Now().Add(hostFileEvery)
	}
}

// flushHostFile rewrites the pid file once it is due, if what runs differs
// from what it says.
func (l *loop) flushHostFile(now time.Time) {
	if l.hostDue.IsZero() || now.Before(l.hostDue) {
		return
	}
	same := len(l.hostRuns) == len(l.running)
	for id, r := range l.running {
		if fence, ok := l.hostRuns[id]; !ok || fence != r.fence {
			same = false
			break
		}
	}
	if same {
		l.hostDue = time.Time{}
		return
	}
	if err := l.writeHostFile(); err != nil {
		l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("queue %s: write this worker's pid file: %w", l.w.q, err)})
	}
}

// hostFileDue is when flushHostFile has a write to make (zero: none).
func (l *loop) hostFileDue() time.Time { return l.hostDue }

// removeHostFile removes this worker's pid file as it stops.
func (l *loop) removeHostFile() {
	if sd := l.w.qs.m.StateDir(); sd != nil {
		_ = sd.RemovePIDFile(l.hostGroup(), l.id)
	}
}

// watchHost watches the other workers of this host, while it holds the
// host's gate for the queue, until ctx ends. Until it holds the gate, it
// waits for its holder's process to exit (and tries again every
// watchRetry, for a holder that gave it up and lives on).
func (l *loop) watchHost(ctx context.Context) {
	sd := l.w.qs.m.StateDir()
	if sd == nil {
		return
	}
	gate := l.hostGate()
	holder := hostlocal.Holder{Host: l.w.qs.m.Host(), Instance: l.id, Purpose: "watch the workers of queue " + l.w.q}
	for {
		lk, err := sd.TryLock(gate, holder)
		if err == nil {
			l.watchHostWorkers(ctx, sd)
			_ = lk.Unlock()
			return
		}
		wctx, cancel := context.WithTimeout(ctx, watchRetry)
		var le *hostlocal.LockedError
		if errors.As(err, &le) && le.Holder != nil && le.Holder.PID > 0 {
			_ = hostlocal.WaitExit(wctx, le.Holder.Process())
		} else {
			<-wctx.Done()
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}

// watchHostWorkers waits for the processes of the pid files of this host's
// workers of the queue to exit, each in a goroutine of its own (parked in
// the runtime's poller where the kernel has pidfds), reads the folder for
// new files every scanEvery, and frees what a dead one held. It returns
// when ctx ends, its goroutines stopped.
func (l *loop) watchHostWorkers(ctx context.Context, sd *hostlocal.StateDir) {
	group := l.hostGroup()
	exited := make(chan string)
	waits := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	defer func() {
		for _, cancel := range waits {
			cancel()
		}
		wg.Wait()
	}()
	scan := time.NewTicker(scanEvery)
	defer scan.Stop()
	for {
		if names, err := sd.PIDFiles(group); err == nil {
			seen := make(map[string]bool, len(names))
			for _, name := range names {
				seen[name] = true
				if name == l.id || waits[name] != nil {
					continue
				}
				var f hostFile
				if sd.ReadPIDFile(group, name, &f) != nil {
					continue
				}
				p := hostlocal.Process{PID: f.PID, Start: f.PIDStart}
				if !p.ThisBoot() || f.Host != l.w.qs.m.Host() {
					continue // not a process of this boot, or of this host id: never judged
				}
				wctx, cancel := context.WithCancel(ctx)
				waits[name] = cancel
				wg.Go(func() {
					if hostlocal.WaitExit(wctx, p) == nil {
						select {
						case exited <- name:
						case <-wctx.Done():
						}
					}
				})
			}
			for name, cancel := range waits {
				if !seen[name] {
					cancel()
					delete(waits, name)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-scan.C:
		case name := <-exited:
			// Done, or a command of it still runs: the next scan waits on
			// it again, and as it is gone, tries again at once.
			l.freeHostWorker(ctx, sd, name)
			waits[name]()
			delete(waits, name)
		}
	}
}

// freeHostWorker frees what the dead worker name held; it reports whether
// nothing is left to do.
func (l *loop) freeHostWorker(ctx context.Context, sd *hostlocal.StateDir, name string) bool {
	group := l.hostGroup()
	var f hostFile
	if err := sd.ReadPIDFile(group, name, &f); err != nil {
		return true // gone: its worker stopped and removed it
	}
	if f.Queue != l.w.q || f.Worker != name || f.Host != l.w.qs.m.Host() {
		return true
	}
	done, err := l.w.qs.freeDeadWorker(ctx, l.w.q, f)
	if err != nil && ctx.Err() == nil {
		l.w.emit(Event{Kind: EventError, Err: fmt.Errorf("queue %s: free what dead worker %s (pid %d) held: %w", l.w.q, name, f.PID, err)})
	}
	if done {
		_ = sd.RemovePIDFile(group, name)
	}
	return done
}

// freeDeadWorker removes the key locks and tokens the dead worker of f
// held, each by compare-and-set and only while it names that worker's
// process and that process and its command's group are gone; then its
// presence and inbox. done says nothing is left to do (a command still
// running keeps its lock: it is checked again).
func (qs *Queues) freeDeadWorker(ctx context.Context, q string, f hostFile) (done bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*qs.bucket.Client().Timeout())
	defer cancel()
	done = true
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, r := range f.Runs {
		wg.Go(func() {
			left, err := qs.freeDeadRun(ctx, q, f, r)
			mu.Lock()
			defer mu.Unlock()
			if left {
				done = false
			}
			if err != nil && !errors.Is(err, kv.ErrConflict) && !errors.Is(err, kv.ErrNotFound) {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if !done || len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	for _, key := range []string{presenceKey(q, f.Worker), inboxKey(q, f.Worker)} {
		if e, err := qs.bucket.Get(ctx, key); err == nil {
			if key == presenceKey(q, f.Worker) {
				if p, err := decodePresence(q, e); err != nil || p.PID != f.PID || p.PIDStart != f.PIDStart {
					continue
				}
			}
			_ = qs.bucket.Delete(ctx, key, e.Revision, nil)
		}
	}
	return true, nil
}

// freeDeadRun removes the lock and token of run r of the dead worker of f.
// left says the lock stays: the command it names still runs.
func (qs *Queues) freeDeadRun(ctx context.Context, q string, f hostFile, r hostRun) (left bool, err error) {
	e, err := qs.m.Bucket().Get(ctx, r.Slot)
	switch {
	case errors.Is(err, kv.ErrNotFound):
	case err != nil:
		return false, err
	default:
		s := lockView(e)
		if s.Fence != r.Fence || s.Host != f.Host || s.PID != f.PID || s.PIDStart != f.PIDStart {
			break // another attempt's, or another process's
		}
		if !processGone(s.PID, s.PIDStart, s.Meta["child_pid"], s.Meta["child_pid_start"]) {
			return true, nil
		}
		if err := qs.m.Reap(ctx, r.Slot, e.Revision, nil); err != nil {
			return false, err
		}
	}
	if r.Token < 0 {
		return false, nil
	}
	te, err := qs.bucket.Get(ctx, tokenKey(q, r.Token))
	if err != nil {
		return false, err
	}
	tok, err := decodeToken(te)
	if err != nil || tok.Fence != r.Fence || tok.PID != f.PID || tok.PIDStart != f.PIDStart {
		return false, nil
	}
	return false, qs.bucket.Delete(ctx, tokenKey(q, r.Token), te.Revision, nil)
}
