package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/kv"
)

// traces is where every KV operation of the run is recorded: each host's
// baton processes append to <host>.jsonl (BATON_KV_TRACE), each library
// client of the harness to a file of its own, and the harness's raw writes
// (garbage) to harness.jsonl. checkTraces reads them all.
type traces struct {
	dir   string
	mu    sync.Mutex
	files []*os.File
	raw   kv.Tracer
	ids   atomic.Uint64
}

func newTraces(dir string) (*traces, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	t := &traces{dir: dir}
	var err error
	t.raw, err = t.tracer("harness")
	return t, err
}

// hostFile is the trace file of host's baton processes.
func (t *traces) hostFile(host string) string { return filepath.Join(t.dir, host+".jsonl") }

// tracer is a JSON tracer writing to <name>.jsonl.
func (t *traces) tracer(name string) (kv.Tracer, error) {
	f, err := os.OpenFile(filepath.Join(t.dir, name+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.files = append(t.files, f)
	t.mu.Unlock()
	return kv.NewJSONTracer(f), nil
}

// rawPut records an unconditional write (garbage) the harness makes
// through the raw NATS API, and returns the function that records its
// outcome: its revision, or its error (then unknown: it may have landed).
func (t *traces) rawPut(bucket, key string, value []byte) func(rev uint64, err error) {
	id := t.ids.Add(1)
	client := fmt.Sprintf("%d-harness", os.Getpid())
	t.raw.Call(kv.TraceCall{Client: client, ID: id, Time: time.Now(), Bucket: bucket, Key: key, Op: kv.TracePut, Value: value})
	return func(rev uint64, err error) {
		r := kv.TraceReturn{Client: client, ID: id, Time: time.Now(), Outcome: kv.OutcomeOK, Revision: rev}
		if err != nil {
			r.Outcome, r.Revision, r.Err = kv.OutcomeUnknown, 0, err
		}
		t.raw.Return(r)
	}
}

func (t *traces) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range t.files {
		_ = f.Close()
	}
	t.files = nil
}

// linTimeout bounds the linearizability check of one key's history (each
// of its two passes). Nearly every history is decided in milliseconds; a
// few hundred operations of one busy key, with writes of unknown outcome
// and calls that hung through a partition, once took just over a minute.
const linTimeout = 3 * time.Minute
