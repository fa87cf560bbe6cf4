package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// One write on the wire: publish sends it and reads the stream's
// acknowledgement, within the time of the public call it belongs to (call).
// It sends again what the server asks to have sent again (no leader yet, an
// earlier write of the key in progress) and marks the answers that leave the
// write possibly applied, so that the compare-and-set loops of write.go
// re-read before they decide.

// errNoAnswer marks a publish whose answer was lost: it may have landed.
var errNoAnswer = errors.New("kv: no answer to a write; it may have been applied")

// errMaybeApplied marks a write given up on that may have landed, with no
// time left to find out.
var errMaybeApplied = errors.New("it may have been applied")

// publish sends one write and waits for the stream's acknowledgement,
// retrying while the stream elects a leader. expected is the revision the
// write's header expects. A conflict comes back as ErrConflict (wrapping
// the server's error) and a lost answer as errNoAnswer; an error after an
// answer that leaves the write possibly applied (503, an in-progress
// refusal, a deposed leader's refusal) wraps errNoAnswer too, so that the
// caller re-reads, or errMaybeApplied when no time is left to.
func (b *Bucket) publish(k *call, m *nats.Msg, expected uint64) (uint64, error) {
	ack, err := b.sendOnce(k, m)
	return b.settle(k, m, expected, ack, err)
}

// settle is publish from the write's first answer on (ack, err): sent
// here, or ahead of its call (Pipeline).
func (b *Bucket) settle(k *call, m *nats.Msg, expected uint64, ack pubAckResponse, err error) (uint64, error) {
	if err == nil && ack.Error == nil {
		return ack.Seq, nil // the common case, kept apart from the retries below
	}
	key := m.Subject[len(b.prefix):]
	backoff := 10 * time.Millisecond
	retry := func() bool {
		select {
		case <-k.context().Done():
			return false
		case <-time.After(backoff):
			backoff = min(2*backoff, 250*time.Millisecond)
			return true
		}
	}
	// A replicated stream's leader refuses a compare-and-set on a key while
	// an earlier write of that key is between its proposal and its apply
	// (error 10164, where a real mismatch is 10071 with the key's revision),
	// even when that earlier write was this client's, already acknowledged:
	// the leader clears its mark just after the acknowledgement leaves. That
	// leader did not apply the write; it is sent again after a pause a
	// little longer each time, until the call's deadline (every call has
	// one: newCall). A rival's write in progress resolves the same way:
	// once it is applied, this one is refused as a real conflict. (The
	// refusal may also be a deposed leader's, below.)
	inProcess := 500 * time.Microsecond
	retryInProcess := func() bool {
		select {
		case <-k.context().Done():
			return false
		case <-time.After(inProcess):
			inProcess = min(2*inProcess, 50*time.Millisecond)
			return true
		}
	}
	// A transient answer (503: the stream is between leaders) can come from
	// a leader whose proposal of this very write is then committed by its
	// successor: from then on, an error does not prove the write was not
	// applied, and is returned with errNoAnswer, so that the caller re-reads
	// and recognises its own write.
	//
	// So can a refusal. A leader cut off from the others goes on answering
	// as leader until it hears of its successor, and while both hold the
	// stream's subscription a write reaches both: the successor may apply it
	// while the deposed one, answering first, refuses it from its old copy
	// (adr/0026). Its refusal gives itself away only when it names a last
	// revision older than the one expected, which the key had (revisions
	// only grow); and an in-progress refusal (10164, replicated streams
	// only) may be its own stuck proposal's. After either, the write may
	// have landed.
	maybe := false
	unsure := func(err error) error {
		if maybe {
			return fmt.Errorf("%w (%w)", err, errNoAnswer)
		}
		return err
	}
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			ack, err = b.sendOnce(k, m)
		}
		if errors.Is(err, nats.ErrNoResponders) {
			// No stream took the subject: a missing bucket, JetStream off, or
			// a stream between leaders.
			if _, ierr := b.c.streamInfo(k.context(), b.stream); ierr != nil {
				return 0, ierr
			}
			if retry() {
				continue
			}
			return 0, unsure(b.c.requestError(b.what("write", key), k.context().Err()))
		}
		if err != nil {
			return 0, unsure(err)
		}
		switch {
		case ack.Error == nil:
			return ack.Seq, nil
		case ack.Error.ErrorCode == codeWrongLastSeqConst && retryInProcess():
			maybe = true
			b.c.inProcessRetries.Add(1)
			continue
		case ack.Error.ErrorCode == codeWrongLastSeqConst:
			// No time is left to find out by a re-read.
			return 0, fmt.Errorf("%w: %s: the stream's leader kept refusing it while an earlier write of the key was in progress: %w (%w)", ErrUnavailable, b.what("write", key), error(ack.Error), errMaybeApplied)
		case isWrongLastSeq(ack.Error):
			if last, ok := lastSeqOf(ack.Error); ok && last <= expected && b.c.clustered() {
				maybe = true // answered from a copy older than the key: a deposed leader's
			}
			return 0, unsure(fmt.Errorf("%w: %w", ErrConflict, error(ack.Error)))
		case transient(ack.Error):
			maybe = true
			if retry() {
				continue
			}
			return 0, unsure(b.c.streamError(b.what("write", key), ack.Error))
		default:
			return 0, unsure(b.c.streamError(b.what("write", key), ack.Error))
		}
	}
}

// what names an operation on key of this bucket, for errors.
func (b *Bucket) what(op, key string) string { return op + " " + b.cfg.Name + "/" + key }

// sendOnce sends one write and decodes its acknowledgement. A lost answer
// is errNoAnswer; no responders is nats.ErrNoResponders, unwrapped.
func (b *Bucket) sendOnce(k *call, m *nats.Msg) (pubAckResponse, error) {
	var ack pubAckResponse
	if b.c.inProcess.Load() > 0 && b.c.inProcess.Add(-1) >= 0 {
		// Fault injection (tests): refused unsent, as in progress.
		ack.Error = &jetstream.APIError{Code: 400, ErrorCode: codeWrongLastSeqConst, Description: "wrong last sequence"}
		return ack, nil
	}
	if b.c.refuseStale.Load() > 0 && b.c.refuseStale.Add(-1) >= 0 {
		// Fault injection (tests): refused unsent, as by a deposed leader.
		ack.Error = staleRefusal()
		return ack, nil
	}
	actx, cancel := k.attempt()
	w := b.c.refusals.begin(m.Subject, cancel)
	resp, err := b.c.nc.RequestMsgWithContext(actx, m)
	err = b.c.refusals.end(w, err)
	cancel()
	if err == nil {
		if ok, fack, ferr := b.c.faultyAnswer(); ok {
			return fack, ferr
		}
	}
	if err != nil {
		what := b.what("write", m.Subject[len(b.prefix):])
		cerr := k.err()
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return ack, err
		case cerr == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)):
			return ack, errNoAnswer
		case cerr != nil:
			// The caller's context ended: say so, even if an interruption (a
			// lost connection, a new leader) ended the attempt at that moment.
			return ack, b.c.requestError(what, cerr)
		default:
			return ack, b.c.requestError(what, err)
		}
	}
	if seq, ok := parsePubAck(resp.Data); ok {
		ack.Seq = seq
		return ack, nil
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return ack, fmt.Errorf("%s: undecodable acknowledgement from %s: %w", b.what("write", m.Subject[len(b.prefix):]), b.c.url, err)
	}
	return ack, nil
}

// faultyAnswer is the answer fault injection (tests) puts in the place of
// a landed write's, if any.
func (c *Client) faultyAnswer() (bool, pubAckResponse, error) {
	var ack pubAckResponse
	switch {
	case c.dropAnswers.Load() > 0 && c.dropAnswers.Add(-1) >= 0:
		return true, ack, errNoAnswer // the write landed, its answer is lost
	case c.answerStale.Load() > 0 && c.answerStale.Add(-1) >= 0:
		// The write landed, but a deposed leader's refusal was the answer
		// that came first.
		ack.Error = staleRefusal()
		return true, ack, nil
	case c.answerUnavailable.Load() > 0 && c.answerUnavailable.Add(-1) >= 0:
		// The write landed, but the answer says the stream was between
		// leaders.
		ack.Error = &jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}
		return true, ack, nil
	}
	return false, ack, nil
}

// parsePubAck reads an acknowledgement of a stored write in the form the
// server writes it, {"stream":"NAME","seq":N}, and nothing else: anything
// more (an error, a duplicate, a domain) is left to json.Unmarshal, whose
// cost is a visible share of a write's client CPU (adr/0017).
func parsePubAck(data []byte) (uint64, bool) {
	const head = `{"stream":"`
	if len(data) < len(head) || string(data[:len(head)]) != head {
		return 0, false
	}
	rest := data[len(head):]
	i := 0
	for i < len(rest) && rest[i] != '"' {
		if c := rest[i]; c == '\\' || c < 0x20 || c >= 0x80 {
			return 0, false
		}
		i++
	}
	const seq = `","seq":`
	rest = rest[i:]
	if len(rest) < len(seq) || string(rest[:len(seq)]) != seq {
		return 0, false
	}
	rest = rest[len(seq):]
	var n uint64
	digits := 0
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		d := uint64(rest[digits] - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
		digits++
	}
	if digits == 0 || rest[0] == '0' || digits+1 != len(rest) || rest[digits] != '}' {
		return 0, false
	}
	return n, true
}

// lastSeqOf reads the last revision a wrong-last-sequence refusal (10071)
// names: "wrong last sequence: N".
func lastSeqOf(e *jetstream.APIError) (uint64, bool) {
	i := strings.LastIndexByte(e.Description, ' ')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(e.Description[i+1:], 10, 64)
	return n, err == nil
}

// staleRefusal is a deposed leader's refusal of a write to a key it has no
// copy of (fault injection for tests).
func staleRefusal() *jetstream.APIError {
	return &jetstream.APIError{Code: 400, ErrorCode: codeWrongLastSeq, Description: "wrong last sequence: 0"}
}

// call is one public operation's time: its caller's context, bounded by
// the client's timeout as callCtx bounds it. The bounded context itself is
// made only when the call needs it (a retry, a re-read), so that a write
// answered at once makes one context, its attempt's.
type call struct {
	c      *Client
	parent context.Context
	// deadline is the call's own, when the client's timeout ends it before
	// parent's deadline; zero when parent's comes first.
	deadline time.Time
	ctx      context.Context // the bounded context, once made
	cancel   context.CancelFunc
}

func (c *Client) newCall(ctx context.Context) call {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= c.timeout {
		return call{c: c, parent: ctx, ctx: ctx}
	}
	return call{c: c, parent: ctx, deadline: time.Now().Add(c.timeout)}
}

// context is the call's context: parent bounded by the call's deadline.
func (k *call) context() context.Context {
	if k.ctx == nil {
		k.ctx, k.cancel = context.WithDeadline(k.parent, k.deadline)
	}
	return k.ctx
}

// err is the call's context's error, without making it.
func (k *call) err() error {
	if k.ctx != nil {
		return k.ctx.Err()
	}
	if err := k.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(k.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// attempt is the context of one request of the call, as attemptCtx bounds
// it, derived from parent while the call's own context is not made.
func (k *call) attempt() (context.Context, context.CancelFunc) {
	if k.ctx != nil {
		return k.c.attemptCtx(k.ctx)
	}
	d := min(max(k.c.timeout/2, 250*time.Millisecond), time.Until(k.deadline)*3/4)
	return context.WithTimeout(k.parent, d)
}

// end releases the call's context, if it was made.
func (k *call) end() {
	if k.cancel != nil {
		k.cancel()
	}
}
