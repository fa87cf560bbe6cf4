package hostlocal

import "sort"

// ExitWatch tells which of a set of processes have exited. On Linux it
// holds a pidfd of each and checks them all with one poll(2), so that a
// process watching hundreds of others pays one system call per check, and
// a recycled pid cannot pass for the process it was; elsewhere it checks
// each with Alive. It is not safe for concurrent use.
type ExitWatch struct {
	procs map[string]*exitWatched
}

type exitWatched struct {
	p Process
	h exitHandle // invalid: checked with Alive
}

// NewExitWatch returns an empty watch; Close releases what it holds.
func NewExitWatch() *ExitWatch { return &ExitWatch{procs: map[string]*exitWatched{}} }

// Watch adds process p under name (replacing what name watched). A process
// that is gone already is reported by the next Exited.
func (w *ExitWatch) Watch(name string, p Process) {
	w.Forget(name)
	w.procs[name] = &exitWatched{p: p, h: openExit(p)}
}

// Watching reports whether name is watched.
func (w *ExitWatch) Watching(name string) bool { _, ok := w.procs[name]; return ok }

// Forget stops watching name.
func (w *ExitWatch) Forget(name string) {
	if e, ok := w.procs[name]; ok {
		e.h.close()
		delete(w.procs, name)
	}
}

// Names are the names watched, sorted.
func (w *ExitWatch) Names() []string {
	out := make([]string, 0, len(w.procs))
	for name := range w.procs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Exited returns the names of the watched processes that have exited (and
// stays watching them until Forget), sorted.
func (w *ExitWatch) Exited() []string {
	var out []string
	var polled []string
	var hs []exitHandle
	for name, e := range w.procs {
		if e.h.valid() {
			polled = append(polled, name)
			hs = append(hs, e.h)
		} else if !e.p.Alive() {
			out = append(out, name)
		}
	}
	for i, gone := range pollExits(hs) {
		if gone {
			out = append(out, polled[i])
		}
	}
	sort.Strings(out)
	return out
}

// Close stops watching everything.
func (w *ExitWatch) Close() {
	for name := range w.procs {
		w.Forget(name)
	}
}
