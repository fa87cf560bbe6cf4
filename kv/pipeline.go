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
// connection without waiting for each answer, and then waits for their
// answers: n writes cost about one round trip, not n.
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
	msgs := make([]*nats.Msg, len(ws))
	ahead := make([]jetstream.PubAckFuture, len(ws))
	sending := true
	for i, w := range ws {
		m, err := b.writeMsg(w)
		if err != nil {
			out[i].Err = err
			continue
		}
		msgs[i] = m
		if !sending {
			continue
		}
		// No retries of its own on no responders: sent again later, it
		// could land behind the writes after it. settle retries.
		f, err := b.c.js.PublishMsgAsync(m, jetstream.WithRetryAttempts(0))
		if err != nil {
			sending = false
			continue
		}
		ahead[i] = f
	}
	// The writes sent ahead are settled side by side, as their answers
	// come; those not sent ahead go one at a time, in order, after them.
	var wg sync.WaitGroup
	for i := range ws {
		if ahead[i] != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = b.settleWrite(ctx, ws[i], b.answerOf(ahead[i], ws[i].Key))
			}()
		}
	}
	wg.Wait()
	for i := range ws {
		if msgs[i] != nil && ahead[i] == nil {
			out[i] = b.settleWrite(ctx, ws[i], nil)
		}
	}
	return out
}

// settleWrite makes w as its own call would, taking its first answer from
// ahead if it was sent ahead.
func (b *Bucket) settleWrite(ctx context.Context, w Write, ahead func(k *call) (pubAckResponse, error)) WriteResult {
	var r WriteResult
	cw := casWrite{ahead: ahead}
	var s *span
	switch w.Kind {
	case WriteCreate:
		op := TraceCreate
		if w.Rev != 0 {
			op = TraceCreateAfter
		}
		s = b.begin(op, w.Key, w.Rev, w.Value, w.TTL)
		r.Rev, r.Err = b.create(ctx, w.Key, w.Value, w.TTL, w.Rev, &cw)
	case WriteUpdate:
		s = b.begin(TraceUpdate, w.Key, w.Rev, w.Value, w.TTL)
		r.Rev, r.Err = b.update(ctx, w.Key, w.Value, w.TTL, w.Rev, &cw)
	case WriteDelete:
		s = b.begin(TraceDelete, w.Key, w.Rev, w.Value, 0)
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

// answerOf waits, within the first attempt of the write's call, for the
// answer to a write sent ahead, as sendOnce reads its own.
func (b *Bucket) answerOf(f jetstream.PubAckFuture, key string) func(k *call) (pubAckResponse, error) {
	return func(k *call) (pubAckResponse, error) {
		var ack pubAckResponse
		actx, cancel := k.attempt()
		defer cancel()
		select {
		case pa := <-f.Ok():
			if ok, fack, ferr := b.c.faultyAnswer(); ok {
				return fack, ferr
			}
			ack.Stream, ack.Seq = pa.Stream, pa.Sequence
			return ack, nil
		case err := <-f.Err():
			var apiErr *jetstream.APIError
			switch {
			case errors.As(err, &apiErr):
				ack.Error = apiErr
				return ack, nil
			case errors.Is(err, jetstream.ErrNoStreamResponse):
				return ack, nats.ErrNoResponders
			default:
				// A timeout, an undecodable answer, a lost connection: the
				// write may have landed.
				return ack, errNoAnswer
			}
		case <-actx.Done():
			if cerr := k.err(); cerr != nil {
				return ack, b.c.requestError(b.what("write", key), cerr)
			}
			return ack, errNoAnswer
		}
	}
}
