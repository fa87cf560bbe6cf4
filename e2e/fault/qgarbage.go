package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

// Garbage aimed at the work queue's records: its config, its tasks, its
// capacity tokens, its key locks (sessions named by the keys: the records
// the key index is built from), its workers' presence (q.worker.ID) and
// the dispatcher's offers to them (q.inbox.ID), each overwritten through
// the raw NATS API with random bytes, a truncated copy of the record there,
// or a foreign record written with no TTL where baton writes TTL'd ones (a
// token, a byte-for-byte copy of a task, a presence or an inbox, or the
// presence of a worker that does not exist); and token-like records under
// keys that only look like a token's (q.cap.01). Then, as an operator
// would, the harness undoes exactly that garbage: it puts back the config,
// or the task, presence or inbox as it was just before (or removes it), and
// deletes the others, each conditioned on the garbage's revision. Nothing about the verdict changes: a task record the
// harness garbaged is held, never run, until it is put back (adr/0005), and
// must then be done in the end; one it removed is not counted as lost, but
// apart.

// shot is one garbage write and how it is undone.
type shot struct {
	bucket, key string
	junk        []byte
	// restore is put back in place of the junk (nil: the junk is deleted),
	// with restoreTTL.
	restore    []byte
	restoreTTL time.Duration
	// leave: the junk is a foreign record the product must live with; it is
	// not undone.
	leave bool
	// task is the id of the task whose record the junk replaced ("" for
	// other records, and for foreign copies of a task, which still decode).
	task string
	kind string // the fault kind counted
}

// The harness's view of baton's buckets, for its traced clients.
var (
	sessionsBucket = session.BucketConfig(session.DefaultPrefix, 3)
	leasesBucket   = lease.BucketConfig(lease.DefaultPrefix, 3)
	queuesBucket   = queue.BucketConfig(session.DefaultPrefix, 3)
	bucketConfigs  = map[string]kv.BucketConfig{
		sessionsBucket.Name: sessionsBucket, leasesBucket.Name: leasesBucket, queuesBucket.Name: queuesBucket,
	}
)

// queueGarbage writes garbage over one of the queue's records every few
// seconds, leaves it there for a few seconds and undoes it. Once the
// workload is over it looks once more at every record it hit and undoes any
// garbage still there (a publish whose answer was lost can land late).
func (h *harness) queueGarbage(ctx context.Context) {
	raw, err := h.rawClients("lib-qgarbage")
	if err != nil {
		h.stats.stick("queue garbage: %v", err)
		return
	}
	defer raw.close()
	var shots []shot
	for sleep(ctx, h.between(4*time.Second, 9*time.Second)) {
		s, ok := h.aimAtQueue(ctx, raw.kc)
		if !ok {
			continue
		}
		published := time.Now()
		err := raw.publish(ctx, h.tr, s.bucket, s.key, s.junk)
		if err == nil {
			h.undone(s, true, false)
			h.stats.fault(s.kind)
			h.logf("garbage (%s) in %s %s", s.kind, s.bucket, s.key)
			sleep(ctx, h.between(2*time.Second, 5*time.Second))
		}
		if s.leave {
			continue
		}
		shots = append(shots, s)
		landed, removed := h.undoGarbage(raw.kc, s, published, err != nil)
		h.undone(s, landed, removed)
	}
	for _, s := range shots {
		landed, removed := h.undoGarbage(raw.kc, s, time.Now(), false)
		h.undone(s, landed, removed)
	}
}

// undone records garbage that landed over a task record (its publish
// answered, or found there later), and removed when the harness then
// removed it: that task is not counted as lost. One it put back must be
// done in the end.
func (h *harness) undone(s shot, landed, removed bool) {
	if s.task == "" {
		return
	}
	if landed {
		h.qchk.garbaged(s.task)
	}
	if removed {
		h.qchk.removed(s.task)
	}
}

// aimAtQueue picks a queue record and the garbage to write over it: the
// config one time in twelve, a token one in four, a task (one acknowledged
// lately) one in three, a key lock one in eight, a worker's presence or a
// worker's inbox one in twelve each. It reads the record first, to cut it
// or copy it and to put it back.
func (h *harness) aimAtQueue(ctx context.Context, kc *kv.Client) (shot, bool) {
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	latest := func(cfg kv.BucketConfig, key string) (kv.Entry, bool) {
		e, err := kc.Bucket(cfg).Latest(rctx, key)
		if err != nil || !e.Live() {
			return kv.Entry{}, false
		}
		return e, true
	}
	switch n := h.intn(24); {
	case n < 2:
		key := queueName + ".config"
		e, ok := latest(queuesBucket, key)
		if !ok {
			return shot{}, false // never delete the config: put it back
		}
		junk, how := h.spoil(e.Value)
		return shot{bucket: queuesBucket.Name, key: key, junk: junk, restore: e.Value, kind: "garbage_queue_config_" + how}, true
	case n < 8:
		i := h.intn(queueMaxActive)
		key := queueName + ".cap." + strconv.Itoa(i)
		e, live := latest(queuesBucket, key)
		if h.intn(6) == 0 {
			// A token-like record under another spelling of the index, which
			// is no token (a copy of the real one, or one that never was).
			junk := e.Value
			if !live {
				junk = foreignToken(i)
			}
			return shot{bucket: queuesBucket.Name, key: queueName + ".cap.0" + strconv.Itoa(i), junk: junk, kind: "garbage_queue_token_alias"}, true
		}
		if h.intn(3) == 0 {
			// A token that decodes and never expires: a copy of the one there
			// (its holder's renewal then fails), or one naming a task that
			// does not run.
			junk := e.Value
			if !live {
				junk = foreignToken(i)
			}
			return shot{bucket: queuesBucket.Name, key: key, junk: junk, kind: "garbage_queue_token_foreign_no_ttl"}, true
		}
		var cur []byte
		if live {
			cur = e.Value
		}
		junk, how := h.spoil(cur)
		return shot{bucket: queuesBucket.Name, key: key, junk: junk, kind: "garbage_queue_token_" + how}, true
	case n < 16:
		id, ok := h.qchk.recentAcked(h.intn)
		if !ok {
			return shot{}, false
		}
		key := queueName + ".task." + id
		e, live := latest(queuesBucket, key)
		if !live {
			return shot{}, false // finished and gone past its retention
		}
		if h.intn(5) == 0 {
			// The same record again, with no TTL: it still decodes, so the
			// task must still be done in the end.
			return shot{bucket: queuesBucket.Name, key: key, junk: e.Value, leave: true, kind: "garbage_queue_task_foreign_no_ttl"}, true
		}
		junk, how := h.spoil(e.Value)
		s := shot{bucket: queuesBucket.Name, key: key, junk: junk, task: id, kind: "garbage_queue_task_" + how}
		if h.intn(10) < 7 {
			s.restore, s.restoreTTL = e.Value, e.TTL
		}
		return s, true
	case n < 19:
		key := queueKeys[h.intn(len(queueKeys))] // lane 0's slot: the queue has no slot prefix
		var cur []byte
		if e, ok := latest(sessionsBucket, key); ok {
			cur = e.Value
		}
		junk, how := h.spoil(cur)
		return shot{bucket: sessionsBucket.Name, key: key, junk: junk, kind: "garbage_queue_lock_" + how}, true
	case n < 21:
		return h.aimAtWorkers(rctx, kc, "worker")
	default:
		return h.aimAtWorkers(rctx, kc, "inbox")
	}
}

// aimAtWorkers picks a live record of what (worker: a presence, inbox: a
// dispatcher's offers) and the garbage to write over it: a third of the
// time a copy with no TTL (for a presence, one time in two that of a
// worker that does not exist), else random bytes or a truncated copy. A
// copy with no TTL never expires: it is removed; the others are put back
// as they were (with their TTL) or removed, evenly.
func (h *harness) aimAtWorkers(ctx context.Context, kc *kv.Client, what string) (shot, bool) {
	prefix := queueName + "." + what + "."
	es, err := kc.Bucket(queuesBucket).Entries(ctx, prefix+">")
	if err != nil {
		return shot{}, false
	}
	var live []kv.Entry
	for _, e := range es {
		if e.Live() {
			live = append(live, e)
		}
	}
	kind := "garbage_queue_" + what + "_"
	if what == "worker" && (len(live) == 0 || h.intn(6) == 0) {
		id := fmt.Sprintf("%016x", uint64(time.Now().UnixNano()))
		return shot{bucket: queuesBucket.Name, key: prefix + id, junk: ghostWorker(id), kind: kind + "ghost_no_ttl"}, true
	}
	if len(live) == 0 {
		return shot{}, false
	}
	e := live[h.intn(len(live))]
	if h.intn(4) == 0 {
		return shot{bucket: queuesBucket.Name, key: e.Key, junk: e.Value, kind: kind + "foreign_no_ttl"}, true
	}
	junk, how := h.spoil(e.Value)
	s := shot{bucket: queuesBucket.Name, key: e.Key, junk: junk, kind: kind + how}
	if h.intn(2) == 0 {
		s.restore, s.restoreTTL = e.Value, e.TTL
	}
	return s, true
}

// ghostWorker is the presence of a worker that does not exist, held by a
// process of no host of the run, with room for two tasks: the dispatcher
// offers it tasks, which it never claims.
func ghostWorker(id string) []byte {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	return fmt.Appendf(nil, `{"queue":%q,"worker":%q,"host":"elsewhere","pid":1,"instance":"foreign","concurrency":2,"started_at":%q,"renewed_at":%q}`,
		queueName, id, now, now)
}

// spoil is garbage to write over cur (nil: nothing there): half the time a
// truncated copy of it, else 1 to 64 random bytes.
func (h *harness) spoil(cur []byte) ([]byte, string) {
	if len(cur) > 1 && h.intn(2) == 0 {
		return cur[:1+h.intn(len(cur)-1)], "truncated"
	}
	junk := make([]byte, 1+h.intn(64))
	for i := range junk {
		junk[i] = byte(h.intn(256))
	}
	return junk, "random"
}

// foreignToken is a capacity token that decodes, for a task that does not
// exist, held by a process of no host of the run.
func foreignToken(i int) []byte {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	return fmt.Appendf(nil, `{"queue":%q,"index":%d,"task":"foreign-%d","key":%q,"slot":%q,"fence":1,"host":"elsewhere","pid":1,"instance":"foreign","acquired_at":%q,"renewed_at":%q}`,
		queueName, i, time.Now().UnixNano(), queueKeys[0], queueKeys[0], now, now)
}

// rawClients are a garbage actor's connections: the raw NATS API for the
// garbage itself, and a traced kv client to read records and undo it.
type rawClients struct {
	nc *nats.Conn
	js jetstream.JetStream
	kc *kv.Client
}

func (h *harness) rawClients(name string) (*rawClients, error) {
	nc, err := nats.Connect(h.cl.urls(), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	r := &rawClients{nc: nc}
	if r.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, err
	}
	tr, err := h.tr.tracer(name)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if r.kc, err = kv.NewClient(nc, kv.WithTimeout(3*time.Second), kv.WithTracer(tr)); err != nil {
		nc.Close()
		return nil, err
	}
	return r, nil
}

func (r *rawClients) close() { r.nc.Close() }

// publish writes junk under key of bucket with no TTL, unconditionally,
// and traces it. An error leaves it unknown whether it landed.
func (r *rawClients) publish(ctx context.Context, tr *traces, bucket, key string, junk []byte) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	done := tr.rawPut(bucket, key, junk)
	ack, err := r.js.Publish(pctx, "$KV."+bucket+"."+key, junk)
	var rev uint64
	if err == nil {
		rev = ack.Sequence
	}
	done(rev, err)
	return err
}
