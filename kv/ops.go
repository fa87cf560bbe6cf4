package kv

import (
	"bytes"
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

// maxCASAttempts bounds the re-read-and-retry loop of one CAS call: a create
// over a tombstone, a replicated stream's false conflict, a lost answer.
const maxCASAttempts = 4

// Latest returns the key's last revision as the stream leader holds it,
// whatever it is: a value, a tombstone (OpDelete) or an expiry marker
// (OpExpire). It returns ErrNotFound if the key has no message at all.
func (b *Bucket) Latest(ctx context.Context, key string) (Entry, error) {
	s := b.begin(TraceLatest, key, 0, nil, 0)
	e, err := b.latestCall(ctx, key)
	s.read(e, err)
	return e, err
}

// latestCall is Latest, untraced.
func (b *Bucket) latestCall(ctx context.Context, key string) (Entry, error) {
	if err := validStoredKey(key); err != nil {
		return Entry{}, err
	}
	ctx, cancel := b.c.callCtx(ctx)
	defer cancel()
	return b.latest(ctx, key)
}

func (b *Bucket) latest(ctx context.Context, key string) (Entry, error) {
	var resp msgGetResponse
	what := "read " + b.cfg.Name + "/" + key
	// STREAM.MSG.GET is answered by the stream leader; a direct get could be
	// answered by a lagging replica.
	req := map[string]string{"last_by_subj": b.prefix + key}
	if err := b.c.call(ctx, what, apiPrefix+"STREAM.MSG.GET."+b.stream, req, &resp); err != nil {
		return Entry{}, err
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == codeNoMessage {
			return Entry{}, fmt.Errorf("%w: %s/%s", ErrNotFound, b.cfg.Name, key)
		}
		return Entry{}, b.c.streamError(what, resp.Error)
	}
	if resp.Message == nil {
		return Entry{}, fmt.Errorf("%s: empty answer from %s", what, b.c.url)
	}
	m := resp.Message
	var h nats.Header
	if len(m.Header) > 0 {
		var err error
		if h, err = nats.DecodeHeadersMsg(m.Header); err != nil {
			return Entry{}, fmt.Errorf("%s revision %d: undecodable headers: %w", what, m.Seq, err)
		}
	}
	return b.entryOf(m.Subject, m.Seq, m.Time, h, m.Data, nil), nil
}

// LatestAtLeast is Latest for a caller that knows the key had revision
// min (its own session's fence). In a cluster an older answer, or none (a
// key with no message), comes from a stream leader cut off from the others
// that has not yet noticed it lost its leadership (adr/0015), or is current:
// the bucket was made anew, or the key's tombstone expired. It is asked
// again, after a pause a little longer each time, for up to wait (and
// within ctx). If it is still older then, the server that answers is asked
// how its copy is doing: when it has heard from a majority of the stream's
// copies within peerSilence, its answer is current and is returned as it
// is; otherwise the answer is a cut-off server's, and LatestAtLeast
// returns ErrUnavailable rather than an answer it knows to be stale. On a
// single server, whose answers are current, it is Latest.
func (b *Bucket) LatestAtLeast(ctx context.Context, key string, min uint64, wait time.Duration) (Entry, error) {
	s := b.begin(TraceLatest, key, 0, nil, 0)
	e, err := func() (Entry, error) {
		if err := validStoredKey(key); err != nil {
			return Entry{}, err
		}
		ctx, cancel := b.c.callCtx(ctx)
		defer cancel()
		e, err := b.latest(ctx, key)
		if !olderThan(e, err, min) || !b.c.clustered() {
			return e, err
		}
		wctx, wcancel := context.WithTimeout(ctx, wait)
		defer wcancel()
		if n, err := b.latestAtLeast(wctx, key, min, true); err == nil || ctx.Err() != nil {
			return n, err
		}
		// Waited enough: the answer as it is, if its server can show it is
		// not cut off.
		st, serr := b.Status(ctx)
		if serr != nil {
			return Entry{}, serr
		}
		if inTouch(st) {
			return b.latest(ctx, key)
		}
		return Entry{}, fmt.Errorf("%w: read %s/%s: answered only from a copy older than revision %d, by %s, which has not heard from most of the stream's copies for %s or more; try again once the cluster is whole",
			ErrUnavailable, b.cfg.Name, key, min, st.Leader, peerSilence)
	}()
	s.read(e, err)
	return e, err
}

// olderThan says whether a read (e, err) shows the key at a revision below
// min: an older entry, or no message at all when min is not 0.
func olderThan(e Entry, err error, min uint64) bool {
	if errors.Is(err, ErrNotFound) {
		return min > 0
	}
	return err == nil && e.Revision < min
}

// peerSilence is how long a stream leader may go without hearing from a
// copy and still count it as in touch: twice the servers' raft heartbeat
// (1 s). A leader cut off from the others stops hearing from them at once,
// and its peers elect another only after 4-9 s of its silence.
const peerSilence = 2 * time.Second

// inTouch says whether a stream's leader, as it reports itself, heard from
// a majority of the stream's copies (itself included) within peerSilence.
func inTouch(st StreamStatus) bool {
	heard := 1
	for _, p := range st.Peers {
		if !p.Offline && p.Active < peerSilence {
			heard++
		}
	}
	return heard > max(st.Replicas, len(st.Peers)+1)/2
}

// latestAtLeast is the latest revision of key as the stream leader holds
// it, asked again while the answer is older than least (a deposed leader's),
// until ctx ends: then ErrUnavailable. ErrNotFound is asked again too if
// missingIsOlder, and otherwise returned as it comes (a key whose tombstone
// expired has no message at all).
func (b *Bucket) latestAtLeast(ctx context.Context, key string, least uint64, missingIsOlder bool) (Entry, error) {
	backoff := 10 * time.Millisecond
	for {
		e, err := b.latest(ctx, key)
		if !olderThan(e, err, least) || (err != nil && !missingIsOlder) {
			return e, err
		}
		select {
		case <-ctx.Done():
			return Entry{}, fmt.Errorf("%w: read %s/%s: answered only from a copy older than revision %d, by a server cut off from the others; try again once the cluster is whole",
				ErrUnavailable, b.cfg.Name, key, least)
		case <-time.After(backoff):
			backoff = min(2*backoff, 250*time.Millisecond)
			b.c.readRetries.Add(1)
		}
	}
}

// entryOfMsg is the entry a watch's consumer delivered in m, and how many
// messages the consumer had left to deliver after it. ok is false for a
// message that is not a consumer's delivery.
//
// A listing passes the TTL it read last (see ttlFromHeader).
func (b *Bucket) entryOfMsg(m *nats.Msg, ttls *lastTTL) (e Entry, pending uint64, ok bool) {
	seq, ts, pending, ok := ackFields(m.Reply)
	if !ok {
		meta, err := m.Metadata()
		if err != nil {
			return Entry{}, 0, false
		}
		seq, ts, pending = meta.Sequence.Stream, meta.Timestamp.UnixNano(), meta.NumPending
	}
	return b.entryOf(m.Subject, seq, time.Unix(0, ts), m.Header, m.Data, ttls), pending, true
}

func (b *Bucket) entryOf(subject string, seq uint64, t time.Time, h nats.Header, data []byte, ttls *lastTTL) Entry {
	return Entry{
		Key:      subject[min(len(b.prefix), len(subject)):],
		Value:    data,
		Revision: seq,
		Created:  t.UTC(),
		Op:       opFromHeader(h),
		TTL:      ttlFromHeader(h, ttls),
	}
}

// Get returns the key's live value. A key without one (never written,
// deleted or expired) is ErrNotFound.
func (b *Bucket) Get(ctx context.Context, key string) (Entry, error) {
	s := b.begin(TraceGet, key, 0, nil, 0)
	e, err := b.latestCall(ctx, key)
	if err == nil && !e.Live() {
		err = fmt.Errorf("%w: %s/%s: %s at revision %d", ErrNotFound, b.cfg.Name, key, e.Op, e.Revision)
	}
	s.read(e, err) // for ErrNotFound, the tombstone or marker in the way
	if err != nil {
		return Entry{}, err
	}
	return e, nil
}

// Create writes value under key if the key has no live value, with the given
// TTL (0: only the bucket's). It returns the new revision, or a
// *ConflictError (ErrConflict) carrying the live entry that is in the way.
func (b *Bucket) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	s := b.begin(TraceCreate, key, 0, value, ttl)
	var w casWrite
	rev, err := b.create(ctx, key, value, ttl, 0, &w)
	s.wrote(rev, err, w.lost)
	return rev, err
}

// CreateAfter is Create for a key the caller saw deleted or expired at
// revision last (in a watch, or from Latest): if last is still the key's
// last revision, it costs one round trip where Create over a tombstone costs
// three. last must be a tombstone's or an expiry marker's revision, never a
// live value's (which would be overwritten). If the key changed since, it
// goes on as Create.
func (b *Bucket) CreateAfter(ctx context.Context, key string, value []byte, ttl time.Duration, last uint64) (uint64, error) {
	s := b.begin(TraceCreateAfter, key, last, value, ttl)
	var w casWrite
	rev, err := b.create(ctx, key, value, ttl, last, &w)
	s.wrote(rev, err, w.lost)
	return rev, err
}

func (b *Bucket) create(ctx context.Context, key string, value []byte, ttl time.Duration, expected uint64, w *casWrite) (uint64, error) {
	if err := b.checkWrite(key, ttl); err != nil {
		return 0, err
	}
	k := b.c.newCall(ctx)
	defer k.end()
	for attempt := 1; ; attempt++ {
		rev, err := w.try(b.publish(&k, b.putMsg(key, value, ttl, expected), expected))
		if !w.undecided(err) {
			return rev, err
		}
		cur, rerr := b.latestAtLeast(k.context(), key, b.c.known(expected), false)
		switch {
		case errors.Is(rerr, ErrNotFound):
			expected = 0
		case rerr != nil:
			return 0, w.unknown(rerr)
		case cur.Live() && w.landed(cur, expected, value):
			return cur.Revision, nil
		case cur.Live():
			return 0, &ConflictError{Key: key, Expected: expected, Current: &cur, Err: err}
		default:
			expected = cur.Revision // create over a tombstone or expiry marker
		}
		if attempt >= maxCASAttempts {
			return 0, b.gaveUp(key, expected, err, rerr, cur)
		}
	}
}

// Update replaces the key's value if its last revision is rev, renewing its
// TTL (ttl is written again with the value, so a renewal never drops it). It
// never writes over a tombstone: a deleted or expired key stays gone. It
// returns the new revision or a *ConflictError (ErrConflict).
//
// A write whose answer was lost, or that a deposed leader refused while
// its successor applied it (adr/0026), is recognised when the stream
// leader holds exactly value at a later revision; values should therefore
// differ from one write to the next (baton's records carry the time of the
// write). rev must be a revision the key had (read or written): in a
// cluster, a re-read older than it is taken for a cut-off server's answer
// and asked again until the deadline.
func (b *Bucket) Update(ctx context.Context, key string, value []byte, ttl time.Duration, rev uint64) (uint64, error) {
	s := b.begin(TraceUpdate, key, rev, value, ttl)
	var w casWrite
	newRev, err := b.update(ctx, key, value, ttl, rev, &w)
	s.wrote(newRev, err, w.lost)
	return newRev, err
}

func (b *Bucket) update(ctx context.Context, key string, value []byte, ttl time.Duration, rev uint64, w *casWrite) (uint64, error) {
	if err := b.checkWrite(key, ttl); err != nil {
		return 0, err
	}
	if rev == 0 {
		return 0, fmt.Errorf("%w: update of %q needs the revision it replaces", ErrInvalidConfig, key)
	}
	k := b.c.newCall(ctx)
	defer k.end()
	for attempt := 1; ; attempt++ {
		newRev, err := w.try(b.publish(&k, b.putMsg(key, value, ttl, rev), rev))
		if !w.undecided(err) {
			return newRev, err
		}
		cur, rerr := b.latestAtLeast(k.context(), key, b.c.known(rev), false)
		switch {
		case errors.Is(rerr, ErrNotFound):
			return 0, &ConflictError{Key: key, Expected: rev, Err: err}
		case rerr != nil:
			return 0, w.unknown(rerr)
		case cur.Live() && w.landed(cur, rev, value):
			return cur.Revision, nil
		case cur.Live() && cur.Revision == rev:
			// Unchanged: the conflict was false (a replicated stream can
			// report one), or the write never arrived.
			if attempt >= maxCASAttempts {
				return 0, b.gaveUp(key, rev, err, nil, cur)
			}
		default:
			return 0, &ConflictError{Key: key, Expected: rev, Current: &cur, Err: err}
		}
	}
}

// Delete removes the key if its last revision is rev. It leaves a tombstone
// carrying note (which watchers and Latest see) that itself expires after
// the bucket's marker TTL. It returns a *ConflictError (ErrConflict) if the
// key changed, was deleted or expired since rev. A delete whose answer was
// lost is recognised by its note, which should therefore be unique.
func (b *Bucket) Delete(ctx context.Context, key string, rev uint64, note []byte) error {
	_, err := b.DeleteRevision(ctx, key, rev, note)
	return err
}

// DeleteRevision is Delete that returns the tombstone's revision, so that
// the caller can create the key again over it in one round trip
// (CreateAfter).
func (b *Bucket) DeleteRevision(ctx context.Context, key string, rev uint64, note []byte) (uint64, error) {
	s := b.begin(TraceDelete, key, rev, note, 0) // the tombstone's TTL: see tracing.call
	var w casWrite
	tomb, err := b.deleteRevision(ctx, key, rev, note, &w)
	s.wrote(tomb, err, w.lost)
	return tomb, err
}

func (b *Bucket) deleteRevision(ctx context.Context, key string, rev uint64, note []byte, w *casWrite) (uint64, error) {
	if err := validStoredKey(key); err != nil {
		return 0, err
	}
	if rev == 0 {
		return 0, fmt.Errorf("%w: delete of %q needs the revision it removes", ErrInvalidConfig, key)
	}
	k := b.c.newCall(ctx)
	defer k.end()
	for attempt := 1; ; attempt++ {
		tomb, err := w.try(b.publish(&k, b.deleteMsg(key, note, rev), rev))
		if !w.undecided(err) {
			return tomb, err
		}
		cur, rerr := b.latestAtLeast(k.context(), key, b.c.known(rev), false)
		switch {
		case errors.Is(rerr, ErrNotFound):
			return 0, &ConflictError{Key: key, Expected: rev, Err: err}
		case rerr != nil:
			return 0, w.unknown(rerr)
		case cur.Op == OpDelete && len(note) > 0 && w.landed(cur, rev, note):
			return cur.Revision, nil
		case cur.Live() && cur.Revision == rev:
			if attempt >= maxCASAttempts {
				return 0, b.gaveUp(key, rev, err, nil, cur)
			}
		default:
			return 0, &ConflictError{Key: key, Expected: rev, Current: &cur, Err: err}
		}
	}
}

// casWrite tracks one CAS call's attempts: whether one may have landed
// unbeknown to the call (its answer lost, or the answer one that does not
// rule it out: publish).
type casWrite struct{ lost bool }

// try notes an attempt that may have landed and passes its outcome on.
func (w *casWrite) try(rev uint64, err error) (uint64, error) {
	w.lost = w.lost || errors.Is(err, errNoAnswer) || errors.Is(err, errMaybeApplied)
	return rev, err
}

// undecided reports an outcome that needs a re-read: a conflict (maybe
// false) or a lost answer.
func (w *casWrite) undecided(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, errNoAnswer)
}

// landed reports whether cur is this call's own write, applied although the
// call was not told so: only then can the same bytes at a later revision be
// ours (a rival that wrote the very same bytes is not told apart).
func (w *casWrite) landed(cur Entry, expected uint64, value []byte) bool {
	return w.lost && cur.Revision > expected && bytes.Equal(cur.Value, value)
}

// unknown reports a re-read that failed after a lost answer: the write may
// or may not have been applied, and the caller must not assume either.
func (w *casWrite) unknown(rerr error) error {
	if w.lost {
		return fmt.Errorf("%w (an earlier attempt may have been applied)", rerr)
	}
	return rerr
}

// gaveUp reports a CAS loop that ran out of attempts without a clear
// answer, with what the leader held at the last read.
func (b *Bucket) gaveUp(key string, expected uint64, last, rerr error, cur Entry) error {
	if errors.Is(last, errNoAnswer) {
		return fmt.Errorf("%w: write %s/%s: %w", ErrUnavailable, b.cfg.Name, key, last)
	}
	ce := &ConflictError{Key: key, Expected: expected, Err: last}
	if rerr == nil && cur.Revision != 0 {
		ce.Current = &cur
	}
	return ce
}

func (b *Bucket) checkWrite(key string, ttl time.Duration) error {
	if err := validStoredKey(key); err != nil {
		return err
	}
	if ttl != 0 {
		return ValidateTTL(ttl)
	}
	return nil
}

func (b *Bucket) putMsg(key string, value []byte, ttl time.Duration, expected uint64) *nats.Msg {
	h := make(nats.Header, 2)
	h[hdrExpectedLastSS] = []string{strconv.FormatUint(expected, 10)}
	if ttl > 0 {
		h[hdrTTL] = []string{ttl.String()}
	}
	return &nats.Msg{Subject: b.prefix + key, Data: value, Header: h}
}

// deleteMsg is a purge that rolls up the key's revisions into a tombstone
// that expires after the bucket's marker TTL (a plain delete tombstone would
// stay forever, and on expiry the server would add a second marker).
func (b *Bucket) deleteMsg(key string, note []byte, expected uint64) *nats.Msg {
	h := make(nats.Header, 4)
	h[hdrKVOperation] = []string{kvOpPurge}
	h[hdrRollup] = []string{rollupSubject}
	h[hdrExpectedLastSS] = []string{strconv.FormatUint(expected, 10)}
	if ttl := b.tombstoneTTL(); ttl > 0 {
		h[hdrTTL] = []string{ttl.String()}
	}
	return &nats.Msg{Subject: b.prefix + key, Data: note, Header: h}
}

// tombstoneTTL is the TTL a delete gives its tombstone: the bucket's marker
// TTL (0: none, the tombstone stays).
func (b *Bucket) tombstoneTTL() time.Duration {
	if b.cfg.MarkerTTL >= time.Second {
		return b.cfg.MarkerTTL
	}
	return 0
}

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
	if err == nil && b.c.dropAnswers.Load() > 0 && b.c.dropAnswers.Add(-1) >= 0 {
		return ack, errNoAnswer // fault injection (tests): the write landed, its answer is lost
	}
	if err == nil && b.c.answerStale.Load() > 0 && b.c.answerStale.Add(-1) >= 0 {
		// Fault injection (tests): the write landed, but a deposed leader's
		// refusal was the answer that came first.
		ack.Error = staleRefusal()
		return ack, nil
	}
	if err == nil && b.c.answerUnavailable.Load() > 0 && b.c.answerUnavailable.Add(-1) >= 0 {
		// Fault injection (tests): the write landed, but the answer says the
		// stream was between leaders.
		ack.Error = &jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}
		return ack, nil
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

// parsePubAck reads an acknowledgement of a stored write in the form the
// server writes it, {"stream":"NAME","seq":N}, and nothing else: anything
// more (an error, a duplicate, a domain) is left to json.Unmarshal. A write
// costs about as much CPU again to decode its answer the general way.
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

// clustered reports whether this client's connection has been to a server
// of a cluster, where a stream can have a deposed leader that does not know
// it yet: only there can an answer be older than what the key had. It stays
// true while the connection is down (a partition is when it matters).
func (c *Client) clustered() bool {
	if c.cluster.Load() {
		return true
	}
	if c.nc.ConnectedClusterName() != "" {
		c.cluster.Store(true)
		return true
	}
	return false
}

// known is rev as a revision the key is known to have had, for a re-read
// after a refusal: on a single server, whose answers are never older than
// the key, it is 0 (nothing to wait for, whatever rev the caller gave).
func (c *Client) known(rev uint64) uint64 {
	if !c.clustered() {
		return 0
	}
	return rev
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
