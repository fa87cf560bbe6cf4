package kvserver

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// What a full disk does to a server, and what the guard below makes of it.
//
// nats-server stores each stream in files under the store directory. When
// a write meets a full disk (ENOSPC), a standalone server marks that stream
// broken: it never answers a write to it again, not even once space is
// freed, until JetStream restarts. A clustered one turns its JetStream off,
// and the other servers go on without it.
//
// So the guard watches the streams (the server's health check) and the
// disk. On a standalone server it restarts JetStream in this process, as
// nats-server itself does on a configuration reload once it turned
// JetStream off:
//
//   - at once, when the store limit is the default (a share of the disk's
//     free space when JetStream starts): restarted on a full disk, that
//     limit is below what the streams hold, and every write is refused at
//     once with "insufficient resources" (which kv reports as
//     kv.ErrStorageFull), while reads go on;
//   - once the disk has room again (diskRoom beyond the store's use), so
//     that writes resume.
//
// Each restart recovers the streams from their files; nothing acknowledged
// is lost, since the write that met the full disk was never acknowledged.
// Watches (ordered consumers) are recreated by their clients.
//
// A clustered server is not restarted in process: there nats-server's
// restart of JetStream races with the requests its peers route to it, and
// its copies did not always catch up. The guard says that its disk is full,
// then that it has room again and that the server must be restarted (a
// stop with handoff, then a start: its copies catch up from its peers).

// diskPoll is how often the guard looks.
const diskPoll = 250 * time.Millisecond

// diskRetry is how long the guard waits to try again a restart of
// JetStream that failed.
const diskRetry = 5 * time.Second

// diskRoom is the free space, beyond what a restarted JetStream's default
// limit needs to be above the store's use, that counts as room again.
const diskRoom = 1 << 20

// DiskEvent is a change the server went through because of its store's
// disk.
type DiskEvent struct {
	// Full is true when writes stopped for lack of space, false when there
	// is room again.
	Full bool
	// Restart: writes resume only once the server is restarted (a clustered
	// server, whose JetStream turned itself off).
	Restart bool
	// Dir is the store directory; Free the bytes free on its filesystem.
	Dir  string
	Free uint64
	// Err is what the server met (Full), or a failed restart of JetStream.
	Err error
}

func (e DiskEvent) String() string {
	free := friendlySize(e.Free)
	switch {
	case e.Full && e.Restart:
		return fmt.Sprintf("the disk of the store %s is full (%s free): this server's JetStream is off, the other servers go on; free space, then restart this server (%v)", e.Dir, free, e.Err)
	case e.Full:
		return fmt.Sprintf("the disk of the store %s is full (%s free): writes fail until space is freed; they resume on their own once it is (%v)", e.Dir, free, e.Err)
	case e.Restart:
		return fmt.Sprintf("the disk of the store %s has room again (%s free): restart this server (Ctrl-C, then start it again) to bring its JetStream back", e.Dir, free)
	case e.Err != nil:
		return fmt.Sprintf("the disk of the store %s has room again (%s free), but JetStream did not restart: %v; restart this server", e.Dir, free, e.Err)
	}
	return fmt.Sprintf("the disk of the store %s has room again (%s free): writes resume", e.Dir, free)
}

func friendlySize(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d KiB", n>>10)
	}
}

// WithDiskEvents calls fn, from a goroutine of the server's, when writes
// stop because the store's disk is full and when they resume. Default:
// none (the guard still runs).
func WithDiskEvents(fn func(DiskEvent)) Option {
	return func(c *serverConfig) error { c.diskEvents = fn; return nil }
}

// diskGuard restarts JetStream when a full disk broke it (see above).
type diskGuard struct {
	ns *server.Server
	js server.JetStreamConfig // JetStream's settings, to restart it with
	// clustered: JetStream runs clustered (told at start: a JetStream that
	// is off is not).
	clustered bool
	notify    func(DiskEvent)
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once

	full bool // writes stopped for lack of space, not yet resumed
	// retryAt is when a restart that failed is tried again; failed is its
	// error, said once.
	retryAt time.Time
	failed  string
}

// startDiskGuard starts the guard of ns, which was started with o.
func startDiskGuard(ns *server.Server, o *server.Options, notify func(DiskEvent)) *diskGuard {
	g := &diskGuard{ns: ns, notify: notify, stop: make(chan struct{}), done: make(chan struct{}), clustered: ns.JetStreamIsClustered(),
		// What nats-server restarts JetStream with after turning it off.
		js: server.JetStreamConfig{
			StoreDir: o.StoreDir, SyncInterval: o.SyncInterval, SyncAlways: o.SyncAlways,
			MaxMemory: o.JetStreamMaxMemory, MaxStore: o.JetStreamMaxStore,
			Domain: o.JetStreamDomain, Strict: !o.NoJetStreamStrict,
		}}
	go g.run()
	return g
}

// close stops the guard and waits for it.
func (g *diskGuard) close() {
	g.once.Do(func() { close(g.stop) })
	<-g.done
}

func (g *diskGuard) run() {
	defer close(g.done)
	t := time.NewTicker(diskPoll)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			g.check()
		}
	}
}

// check looks once: a full disk met, or room again.
func (g *diskGuard) check() {
	dir := g.js.StoreDir
	free, _ := freeSpace(dir)
	if !g.full {
		err := g.outOfSpace(free)
		if err == nil {
			return
		}
		g.full = true
		if !g.clustered && g.js.MaxStore <= 0 {
			// Restarted on a full disk, the default limit refuses every write
			// at once; without it, writes to the broken stream go unanswered.
			if rerr := g.restart(); rerr != nil {
				err = fmt.Errorf("%w; restart JetStream: %w", err, rerr)
			}
		}
		g.event(DiskEvent{Full: true, Restart: g.clustered, Dir: dir, Free: free, Err: err})
		return
	}
	// The default limit of a JetStream started now is three quarters of
	// what the disk has free plus what the streams hold: room when that is
	// above what they hold, by diskRoom.
	now := time.Now()
	if now.Before(g.retryAt) || free*3/4 < g.storeUsed()/4+diskRoom {
		return
	}
	if g.clustered {
		g.full = false
		g.event(DiskEvent{Restart: true, Dir: dir, Free: free})
		return
	}
	if err := g.restart(); err != nil {
		g.retryAt = now.Add(diskRetry)
		if msg := err.Error(); msg != g.failed {
			g.failed = msg
			g.event(DiskEvent{Dir: dir, Free: free, Err: err})
		}
		return
	}
	g.full, g.failed = false, ""
	g.event(DiskEvent{Dir: dir, Free: free})
}

func (g *diskGuard) event(e DiskEvent) {
	if g.notify != nil {
		g.notify(e)
	}
}

// outOfSpace reports a stream broken by a full disk, as the server's
// health check says, or JetStream shut down with the disk full (a clustered
// server turns it off itself when a write meets a full disk); free is what
// the disk has free now.
func (g *diskGuard) outOfSpace(free uint64) error {
	if !g.ns.JetStreamEnabled() {
		if g.ns.Running() && free < diskRoom {
			return fmt.Errorf("JetStream turned itself off with %s free on the store's disk", friendlySize(free))
		}
		return nil
	}
	h := g.ns.Healthz(&server.HealthzOptions{Details: true})
	for _, e := range h.Errors {
		if strings.Contains(e.Error, "no space left") {
			return errors.New(e.Error)
		}
	}
	return nil
}

// storeUsed is what JetStream's streams hold on disk, in bytes.
func (g *diskGuard) storeUsed() uint64 {
	info, err := g.ns.Jsz(&server.JSzOptions{})
	if err != nil || info == nil {
		return 0
	}
	return info.Store
}

// restart shuts JetStream down if it runs and starts it again with the
// server's settings, as nats-server does on a configuration reload after
// it turned JetStream off.
func (g *diskGuard) restart() error {
	if g.ns.JetStreamEnabled() {
		if err := g.ns.ShutdownJetStream(); err != nil {
			return err
		}
	}
	cfg := g.js
	return g.ns.EnableJetStream(&cfg)
}
