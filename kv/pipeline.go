package kv

// Pipelined writes: compare-and-set writes sent one behind the other on
// the client's connection, each without waiting for the answer to the one
// before, then settled one by one as their own calls settle them.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WriteKind is what a Write of a Pipeline does.
type WriteKind uint8

const (
	// WriteCreate is Create, or CreateAfter the tombstone at Rev if Rev is
	// set.
	WriteCreate WriteKind = iota + 1
	// WriteUpdate is Update of the revision Rev.
	WriteUpdate
	// WriteDelete is DeleteRevision of the revision Rev, with Value as its
	// note.
	WriteDelete
)

// Write is one write of a Pipeline.
type Write struct {
	Kind WriteKind
	Key  string
	// Value is the value written; a delete's note.
	Value []byte
	// TTL is a create's or an update's TTL (0: only the bucket's).
	TTL time.Duration
	// Rev is the revision an update or a delete replaces, or the tombstone
	// a create follows (0: none known).
	Rev uint64
}

// WriteResult is a Write's outcome, as its own call returns it: the
// revision written (a delete's tombstone's), or the error.
type WriteResult struct {
	Rev uint64
	Err error
}

// Pipeline makes the writes ws, sent one behind the other on the client's
// connection without waiting for each answer (up to 4,096 in flight),
// and then waits for their answers: n writes cost about one round trip,
// not n.
//
// The bucket's stream applies them in the order sent, so no write is
// applied before one ahead of it in ws: a reader that sees a write's
// effect sees those ahead of it applied, or refused. Each write is then
// settled as its own call (Create, CreateAfter, Update, DeleteRevision)
// settles it, and its result is what that call would return: a refusal is
// re-read to tell a real conflict from a false one, a lost answer is found
// out, side by side with the others. A write sent again in settling, or
// one that could not be sent ahead (the connection's buffer of pending
// answers full), may be applied after writes behind it; the writes from
// that one on are sent one at a time, in order, once the others are
// settled. The writes are independent: one refused does not stop the
// others. Results are in the order of ws.
func (b *Bucket) Pipeline(ctx context.Context, ws []Write) []WriteResult {
	out := make([]WriteResult, len(ws))
	if err := ctx.Err(); err != nil {
		// Nothing is sent, as a request is not once its context is done.
		for i, w := range ws {
			out[i].Err = b.c.requestError(b.what("write", w.Key), err)
		}
		return out
	}
	var window []sentAhead // in flight, oldest first
	var unsent []int       // not sent ahead: sent one at a time, at the end
	var wg sync.WaitGroup
	sending := true
	for i, w := range ws {
		m, err := b.writeMsg(w)
		if err != nil {
			out[i].Err = err
			continue
		}
		if !sending {
			unsent = append(unsent, i)
			continue
		}
		if len(window) == pipelineWindow {
			b.answered(ctx, ws, out, window[0], &wg)
			window = window[1:]
		}
		// The call is traced from before it is sent, as a write of its own.
		s := b.beginWrite(w)
		// No retries of its own on no responders: sent again later, it
		// could land behind the writes after it. settle retries.
		f, err := b.c.js.PublishMsgAsync(m, jetstream.WithRetryAttempts(0))
		if err != nil {
			sending = false
			s.wrote(0, fmt.Errorf("%w: not sent ahead: %w", ErrUnavailable, err), false)
			unsent = append(unsent, i)
			continue
		}
		window = append(window, sentAhead{i: i, f: f, s: s, at: time.Now()})
	}
	for _, x := range window {
		b.answered(ctx, ws, out, x, &wg)
	}
	wg.Wait()
	for _, i := range unsent {
		out[i] = b.settleWrite(ctx, ws[i], nil, b.beginWrite(ws[i]))
	}
	return out
}

// pipelineWindow is how many writes of a Pipeline are in flight at once;
// the client's async publisher holds four times as many (newClient), so
// that a few pipelines at once do not stall it. A thousand kept a batch of
// 10,000 task creates at 0.7x the raw async publishes; this many, 0.9x.
const pipelineWindow = 4096

// sentAhead is a write of a Pipeline in flight: its place, its answer to
// come, its trace and when it was sent.
type sentAhead struct {
	i  int
	f  jetstream.PubAckFuture
	s  *span
	at time.Time
}

// answered takes x's first answer: a plain acknowledgement is its result;
// anything else is settled by its own call's loop, on a goroutine of its
// own (wg), so that the writes behind it are not held up.
func (b *Bucket) answered(ctx context.Context, ws []Write, out []WriteResult, x sentAhead, wg *sync.WaitGroup) {
	ack, err := b.firstAnswer(ctx, x)
	if err == nil && ack.Error == nil {
		out[x.i] = WriteResult{Rev: ack.Seq}
		x.s.wrote(ack.Seq, nil, false)
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		out[x.i] = b.settleWrite(ctx, ws[x.i], func(*call) (pubAckResponse, error) { return ack, err }, x.s)
	}()
}

// firstAnswer waits for the answer to a write sent ahead, as sendOnce
// waits for its own: within an attempt's time from its sending.
func (b *Bucket) firstAnswer(ctx context.Context, x sentAhead) (pubAckResponse, error) {
	var ack pubAckResponse
	var timeout <-chan time.Time
	select {
	case pa := <-x.f.Ok():
		return b.acked(pa)
	case err := <-x.f.Err():
		return b.refused(err)
	default:
		d := max(b.c.timeout/2, 250*time.Millisecond) - time.Since(x.at)
		if dl, ok := ctx.Deadline(); ok {
			d = min(d, time.Until(dl)*3/4)
		}
		t := time.NewTimer(max(d, 0))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case pa := <-x.f.Ok():
		return b.acked(pa)
	case err := <-x.f.Err():
		return b.refused(err)
	case <-timeout:
		if err := ctx.Err(); err != nil {
			return ack, b.c.requestError(b.what("write", x.f.Msg().Subject[len(b.prefix):]), err)
		}
		return ack, errNoAnswer
	case <-ctx.Done():
		return ack, b.c.requestError(b.what("write", x.f.Msg().Subject[len(b.prefix):]), ctx.Err())
	}
}

// acked is a write's acknowledgement, as sendOnce reads one (fault
// injection included).
func (b *Bucket) acked(pa *jetstream.PubAck) (pubAckResponse, error) {
	if ok, fack, ferr := b.c.faultyAnswer(); ok {
		return fack, ferr
	}
	return pubAckResponse{Stream: pa.Stream, Seq: pa.Sequence}, nil
}

// refused is a write's error answer, as sendOnce reads one.
func (b *Bucket) refused(err error) (pubAckResponse, error) {
	var ack pubAckResponse
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr):
		ack.Error = apiErr
		return ack, nil
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return ack, nats.ErrNoResponders
	default:
		// A timeout, an undecodable answer, a lost connection: the write
		// may have landed.
		return ack, errNoAnswer
	}
}

// beginWrite traces w's call, as its own call does.
func (b *Bucket) beginWrite(w Write) *span {
	switch w.Kind {
	case WriteCreate:
		op := TraceCreate
		if w.Rev != 0 {
			op = TraceCreateAfter
		}
		return b.begin(op, w.Key, w.Rev, w.Value, w.TTL)
	case WriteUpdate:
		return b.begin(TraceUpdate, w.Key, w.Rev, w.Value, w.TTL)
	default:
		return b.begin(TraceDelete, w.Key, w.Rev, w.Value, 0)
	}
}

// settleWrite makes w as its own call would, taking its first answer from
// ahead if it was sent ahead, and reports it to its trace s.
func (b *Bucket) settleWrite(ctx context.Context, w Write, ahead func(k *call) (pubAckResponse, error), s *span) WriteResult {
	var r WriteResult
	cw := casWrite{ahead: ahead}
	switch w.Kind {
	case WriteCreate:
		r.Rev, r.Err = b.create(ctx, w.Key, w.Value, w.TTL, w.Rev, &cw)
	case WriteUpdate:
		r.Rev, r.Err = b.update(ctx, w.Key, w.Value, w.TTL, w.Rev, &cw)
	case WriteDelete:
		r.Rev, r.Err = b.deleteRevision(ctx, w.Key, w.Rev, w.Value, &cw)
	}
	s.wrote(r.Rev, r.Err, cw.lost)
	return r
}

// writeMsg checks w as its own call would, and is its first message.
func (b *Bucket) writeMsg(w Write) (*nats.Msg, error) {
	switch w.Kind {
	case WriteCreate:
		if err := b.checkWrite(w.Key, w.TTL); err != nil {
			return nil, err
		}
		return b.putMsg(w.Key, w.Value, w.TTL, w.Rev), nil
	case WriteUpdate:
		if err := b.checkWrite(w.Key, w.TTL); err != nil {
			return nil, err
		}
		if w.Rev == 0 {
			return nil, fmt.Errorf("%w: update of %q needs the revision it replaces", ErrInvalidConfig, w.Key)
		}
		return b.putMsg(w.Key, w.Value, w.TTL, w.Rev), nil
	case WriteDelete:
		if err := validStoredKey(w.Key); err != nil {
			return nil, err
		}
		if w.Rev == 0 {
			return nil, fmt.Errorf("%w: delete of %q needs the revision it removes", ErrInvalidConfig, w.Key)
		}
		return b.deleteMsg(w.Key, w.Value, w.Rev), nil
	default:
		return nil, fmt.Errorf("%w: write of %q: unknown kind %d", ErrInvalidConfig, w.Key, w.Kind)
	}
}
