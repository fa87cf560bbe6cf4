package kv

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Tracer is told of every KV operation of a Bucket made by a Client given
// WithTracer: a TraceCall before the operation's first request is sent, and
// a TraceReturn with the same Client and ID once it returns. A process
// killed in between leaves a call without a return. Both methods are called
// on the caller's goroutine, concurrently from concurrent calls, and must
// not keep or modify the slices they are given.
//
// A caller that also writes to a bucket outside this package (raw NATS
// publishes) can report those writes to the same tracer, as TracePut (an
// unconditional put) or TraceDelete (a tombstone, conditional if Expected is
// set), with a Client name and IDs of its own.
type Tracer interface {
	Call(TraceCall)
	Return(TraceReturn)
}

// TraceOp names a traced operation.
type TraceOp string

// The operations a Bucket traces, and TracePut, which it never makes.
const (
	TraceLatest      TraceOp = "latest"       // Latest: the key's last entry, whatever it is
	TraceGet         TraceOp = "get"          // Get: the key's live value
	TraceCreate      TraceOp = "create"       // Create: write if the key has no live value
	TraceCreateAfter TraceOp = "create_after" // CreateAfter: Create expecting a tombstone's revision
	TraceUpdate      TraceOp = "update"       // Update: write if the key's last revision is Expected
	TraceDelete      TraceOp = "delete"       // Delete, DeleteRevision: a tombstone if the key's last revision is Expected
	TracePut         TraceOp = "put"          // an unconditional write (not made by this package)
)

// Write reports whether the operation writes.
func (o TraceOp) Write() bool { return o != TraceLatest && o != TraceGet }

// Outcome is how a traced call ended, as its caller saw it.
type Outcome string

// The outcomes of a call. OutcomeConflict and OutcomeFailed are definite: the
// write was not applied. OutcomeUnknown is not: the write may or may not have
// been applied, now or later.
const (
	// OutcomeOK: a read returned an entry (TraceReturn.Entry), a write was
	// applied at TraceReturn.Revision.
	OutcomeOK Outcome = "ok"
	// OutcomeNotFound: a read found no entry (Latest: the key has no message
	// at all), or no live value (Get: Entry is then the tombstone or expiry
	// marker it found, if any).
	OutcomeNotFound Outcome = "not_found"
	// OutcomeConflict: a write's condition did not hold. Entry, if set, is
	// what the stream leader held when the call found out (nil for a raw
	// write that did not look).
	OutcomeConflict Outcome = "conflict"
	// OutcomeFailed: the call failed and certainly did not write (invalid
	// input, a refusal the server answered, a missing bucket, a conflict
	// that says nothing of the key's revision), or a read failed at once.
	OutcomeFailed Outcome = "failed"
	// OutcomeUnknown: the call failed after sending, without an answer that
	// settles it (timeout, lost connection, unavailable, context ended).
	OutcomeUnknown Outcome = "unknown"
)

// Definite reports whether the outcome settles whether a write was applied.
func (o Outcome) Definite() bool { return o != OutcomeUnknown }

// TraceCall is an operation as it is invoked.
type TraceCall struct {
	// Client names the client: with ID, it identifies the call within a
	// trace that many clients and processes write.
	Client string
	// ID is unique within the client.
	ID uint64
	// Time is the wall clock when the call was made.
	Time   time.Time
	Bucket string
	Key    string
	Op     TraceOp
	// Expected is the revision a write requires: Update's and Delete's rev,
	// CreateAfter's last; 0 for Create (no live value) and TracePut.
	Expected uint64
	// Value is what a write writes: the value, or a delete's note.
	Value []byte
	// TTL is a write's own TTL: the key's (0: only the bucket's), or for a
	// delete the tombstone's (the bucket's marker TTL).
	TTL time.Duration
	// BucketTTL and MarkerTTL are the bucket's settings as the client knows
	// them (BucketConfig), for a checker: the bucket's TTL, and how long
	// tombstones and expiry markers stay.
	BucketTTL time.Duration
	MarkerTTL time.Duration
}

// TraceReturn is how an operation returned.
type TraceReturn struct {
	Client string
	ID     uint64
	// Time is the wall clock when the call returned.
	Time    time.Time
	Outcome Outcome
	// Revision is the revision a write wrote (OutcomeOK).
	Revision uint64
	// Entry is what a read returned (OutcomeOK), the tombstone or marker Get
	// found (OutcomeNotFound), or what the leader held after a conflict.
	Entry *Entry
	// Err is the error the call returned, if any.
	Err error
}

// WithTracer reports every Bucket operation of the client to t (see
// Tracer). Default: none; nil is none.
func WithTracer(t Tracer) Option {
	return func(c *config) error { c.tracer = t; return nil }
}

// tracing is a traced client's tracer, its name and its call counter.
type tracing struct {
	t      Tracer
	client string
	next   atomic.Uint64
}

// newTracing names a client of this process: its pid and a random suffix.
func newTracing(t Tracer) *tracing {
	if t == nil {
		return nil
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &tracing{t: t, client: strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])}
}

// span is one traced call; nil when the client has no tracer.
type span struct {
	tr       *tracing
	id       uint64
	op       TraceOp
	expected uint64
}

// begin reports a call, if the client is traced.
func (b *Bucket) begin(op TraceOp, key string, expected uint64, value []byte, ttl time.Duration) *span {
	if b.c.trace == nil {
		return nil
	}
	return b.c.trace.call(b, op, key, expected, value, ttl)
}

func (tr *tracing) call(b *Bucket, op TraceOp, key string, expected uint64, value []byte, ttl time.Duration) *span {
	s := &span{tr: tr, id: tr.next.Add(1), op: op, expected: expected}
	if op == TraceDelete {
		ttl = b.tombstoneTTL()
	}
	tr.t.Call(TraceCall{
		Client: tr.client, ID: s.id, Time: time.Now(), Bucket: b.cfg.Name, Key: key, Op: op,
		Expected: expected, Value: value, TTL: ttl, BucketTTL: b.cfg.TTL, MarkerTTL: b.cfg.MarkerTTL,
	})
	return s
}

// read reports a read's return: e is the entry it found, if any (for Get's
// ErrNotFound, the tombstone or marker in the way).
func (s *span) read(e Entry, err error) {
	if s != nil {
		s.readReturn(e, err)
	}
}

func (s *span) readReturn(e Entry, err error) {
	r := TraceReturn{Client: s.tr.client, ID: s.id, Outcome: OutcomeOK, Err: err}
	switch {
	case err == nil:
		r.Entry = &e
	case errors.Is(err, ErrNotFound):
		r.Outcome = OutcomeNotFound
		if e.Revision != 0 {
			r.Entry = &e
		}
	default:
		r.Outcome = classifyFailure(err)
	}
	r.Time = time.Now()
	s.tr.t.Return(r)
}

// wrote reports a write's return; lost says whether an attempt's answer
// was lost (casWrite).
func (s *span) wrote(rev uint64, err error, lost bool) {
	if s != nil {
		s.writeReturn(rev, err, lost)
	}
}

func (s *span) writeReturn(rev uint64, err error, lost bool) {
	r := TraceReturn{Client: s.tr.client, ID: s.id, Outcome: OutcomeOK, Revision: rev, Err: err}
	if err != nil {
		r.Revision = 0
		r.Outcome, r.Entry = s.classifyWrite(err, lost)
	}
	r.Time = time.Now()
	s.tr.t.Return(r)
}

// classifyWrite tells a write that certainly did not happen from one that
// may have. An attempt whose answer was lost may have landed, whatever
// came after; a ConflictError is a conflict only when the entry it carries
// (read after the refusal) shows the condition failing: Create's live
// value, or Update's and Delete's other revision or no entry at all. A
// conflict that gave up on an unchanged key (a replicated stream's false
// conflict) says nothing of the condition.
func (s *span) classifyWrite(err error, lost bool) (Outcome, *Entry) {
	if lost {
		return OutcomeUnknown, nil
	}
	var ce *ConflictError
	if errors.As(err, &ce) {
		cur := ce.Current
		switch s.op {
		case TraceCreate, TraceCreateAfter:
			if cur != nil && cur.Live() {
				return OutcomeConflict, cur
			}
		default:
			if cur == nil || cur.Revision != s.expected {
				return OutcomeConflict, cur
			}
		}
		return OutcomeFailed, nil
	}
	return classifyFailure(err), nil
}

// classifyFailure: a call that failed before sending or that the server
// answered with a refusal certainly wrote nothing; anything else (no answer
// in time, a lost connection, a cancelled context, a permission refusal that
// may concern the reply inbox only) may have.
func classifyFailure(err error) Outcome {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, ErrInvalidKey), errors.Is(err, ErrInvalidTTL), errors.Is(err, ErrInvalidConfig),
		errors.Is(err, ErrBucketNotFound), errors.Is(err, ErrJetStreamDisabled), errors.Is(err, ErrBucketMismatch),
		errors.As(err, &apiErr):
		return OutcomeFailed
	default:
		return OutcomeUnknown
	}
}

// Digest is how a trace records a value: the first 8 bytes of its SHA-256
// in hex, a colon and its length, e.g. "9f86d081884c7d65:312".
func Digest(value []byte) string {
	sum := sha256.Sum256(value)
	return hex.EncodeToString(sum[:8]) + ":" + strconv.Itoa(len(value))
}

// TraceLine is one line of a JSON trace (NewJSONTracer): a call (Event
// "call") or a return ("return"). Values are digests (Digest).
type TraceLine struct {
	Event  string    `json:"ev"`
	Client string    `json:"client"`
	ID     uint64    `json:"id"`
	Time   time.Time `json:"t"`

	Bucket    string        `json:"bucket,omitempty"`
	Key       string        `json:"key,omitempty"`
	Op        TraceOp       `json:"op,omitempty"`
	Expected  uint64        `json:"expected,omitempty"`
	Value     string        `json:"value,omitempty"`
	TTL       time.Duration `json:"ttl,omitempty"`
	BucketTTL time.Duration `json:"bucket_ttl,omitempty"`
	MarkerTTL time.Duration `json:"marker_ttl,omitempty"`

	Outcome  Outcome     `json:"outcome,omitempty"`
	Revision uint64      `json:"rev,omitempty"`
	Entry    *TraceEntry `json:"entry,omitempty"`
	Error    string      `json:"error,omitempty"`
}

// TraceEntry is an entry in a TraceLine.
type TraceEntry struct {
	Revision uint64 `json:"rev"`
	// Op is "put", "delete" or "expire" (Op's String).
	Op    string        `json:"op"`
	Value string        `json:"value"`
	TTL   time.Duration `json:"ttl,omitempty"`
	// Created is the server's time of the revision.
	Created time.Time `json:"created"`
}

// Line is the call as a JSON trace writes it.
func (c TraceCall) Line() TraceLine {
	l := TraceLine{
		Event: "call", Client: c.Client, ID: c.ID, Time: c.Time, Bucket: c.Bucket, Key: c.Key, Op: c.Op,
		Expected: c.Expected, TTL: c.TTL, BucketTTL: c.BucketTTL, MarkerTTL: c.MarkerTTL,
	}
	if c.Op.Write() {
		l.Value = Digest(c.Value)
	}
	return l
}

// Line is the return as a JSON trace writes it.
func (r TraceReturn) Line() TraceLine {
	l := TraceLine{Event: "return", Client: r.Client, ID: r.ID, Time: r.Time, Outcome: r.Outcome, Revision: r.Revision}
	if e := r.Entry; e != nil {
		l.Entry = &TraceEntry{Revision: e.Revision, Op: e.Op.String(), Value: Digest(e.Value), TTL: e.TTL, Created: e.Created}
	}
	if r.Err != nil {
		l.Error = r.Err.Error()
	}
	return l
}

// NewJSONTracer writes each event as one JSON line (a TraceLine) to w, with
// one Write call per line, so that processes appending to one file
// (O_APPEND) do not interleave their lines. It is safe for concurrent use. A
// line that cannot be written is dropped.
func NewJSONTracer(w io.Writer) Tracer { return &jsonTracer{w: w} }

type jsonTracer struct {
	mu sync.Mutex
	w  io.Writer
}

func (t *jsonTracer) Call(c TraceCall)     { t.write(c.Line()) }
func (t *jsonTracer) Return(r TraceReturn) { t.write(r.Line()) }

func (t *jsonTracer) write(l TraceLine) {
	b, err := json.Marshal(l)
	if err != nil {
		b = fmt.Appendf(nil, `{"ev":%q,"client":%q,"id":%d,"error":%q}`, l.Event, l.Client, l.ID, err.Error())
	}
	b = append(b, '\n')
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.w.Write(b)
}
