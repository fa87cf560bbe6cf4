package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Compare-and-set writes: Create, Update and Delete each send one message
// whose header expects the key's last revision (publish.go). A refusal or a
// lost answer is not taken as it comes: the key is re-read from the stream
// leader to tell a real conflict from a false one, and from the call's own
// write having landed (casWrite).

// maxCASAttempts bounds the re-read-and-retry loop of one CAS call: a create
// over a tombstone, a replicated stream's false conflict, a lost answer.
const maxCASAttempts = 4

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
		rev, err := w.try(b.send(&k, b.putMsg(key, value, ttl, expected), expected, w))
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
		newRev, err := w.try(b.send(&k, b.putMsg(key, value, ttl, rev), rev, w))
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
		tomb, err := w.try(b.send(&k, b.deleteMsg(key, note, rev), rev, w))
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
type casWrite struct {
	lost bool
	// ahead is the first answer of a write sent ahead of its call
	// (Pipeline), waited for within the call's first attempt; nil once
	// taken, or for a write the call sends itself.
	ahead func(k *call) (pubAckResponse, error)
}

// send is publish, but for a write sent ahead, whose first answer is
// taken from there.
func (b *Bucket) send(k *call, m *nats.Msg, expected uint64, w *casWrite) (uint64, error) {
	if first := w.ahead; first != nil {
		w.ahead = nil
		ack, err := first(k)
		return b.settle(k, m, expected, ack, err)
	}
	return b.publish(k, m, expected)
}

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

// deleteMsg is a purge: a tombstone that expires after the bucket's marker
// TTL (a plain delete tombstone would stay forever, and on expiry the
// server would add a second marker; a purge counts as a marker itself). It
// rolls up the key's older revisions unless the handle knows the bucket
// keeps one (LearnHistory): the tombstone then replaces the value anyway,
// and the server answers a rollup by walking every consumer of the stream
// (adr/0038).
func (b *Bucket) deleteMsg(key string, note []byte, expected uint64) *nats.Msg {
	h := make(nats.Header, 4)
	h[hdrKVOperation] = []string{kvOpPurge}
	if !b.oneRevision.Load() {
		h[hdrRollup] = []string{rollupSubject}
	}
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
