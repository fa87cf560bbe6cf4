package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// Reads. A read that decides ownership is answered by the stream leader,
// never by a replica that may lag; one that knows the key had a later
// revision than the answer shows asks again rather than trust a leader cut
// off from the others (LatestAtLeast).

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
