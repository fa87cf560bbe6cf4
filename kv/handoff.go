package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/names"
)

// Handoff is one bucket's stream whose leadership HandOff moved.
type Handoff struct {
	Bucket string        // the bucket
	Stream string        // its stream, KV_<bucket>
	From   string        // the server that led it
	To     string        // the server that answered as its leader afterwards
	Took   time.Duration // from the first step-down request to that answer
}

const (
	handOffPoll   = 20 * time.Millisecond  // between two reads of a stream's leader
	handOffAsk    = 500 * time.Millisecond // bound of one read or request
	handOffResend = time.Second            // a leader that has not moved by then is asked again
	// handOffOffline is how long the copies a stream needs must have been
	// seen offline before waiting is given up: a server restarted just
	// before (a quick rolling restart) is offline for a moment, then
	// catches up; a whole cluster stopping stays offline.
	handOffOffline = 3 * time.Second
	// handOffFresh is how recently a copy must have answered its leader to
	// count as current. The leader reports a copy current while it lacks no
	// committed entry, which a stream with no writes keeps saying of a copy
	// whose server stopped (or is restarting) until it has not answered for
	// 10s; a live copy answers at least every second (raft's heartbeat).
	handOffFresh = 400 * time.Millisecond
)

// HandOff prepares a planned stop of the server named server for the
// streams of buckets: for each stream with a copy on server, it waits until
// enough of the other copies are current for the stream to commit writes
// without server (a quorum of its copies: a server just restarted may still
// be catching up, and stopping server before it has would stall every
// write of the stream until it has), and if server leads the stream, it
// moves the leadership to the current copy the least behind and returns
// once that server answers as the stream's leader (STREAM.INFO names it).
// Stopped afterwards, server leaves no stream leaderless: after a leader
// that stops without a word, a stream waits seconds for an election.
//
// It works on the streams concurrently and returns the leaderships moved,
// in the order of buckets, with an error for each bucket whose stream still
// needs server: ErrHandOff when no other server holds a copy (a bucket with
// one replica), when too many of the other copies have been offline for 3 s
// for waiting to help (stopping the whole cluster; a server restarted a
// moment before is offline until it rejoins, and is waited for), or
// when the stream was not ready before ctx ended (the error then wraps
// ctx's error too); ErrPermission when the user may not read the stream's
// state ($JS.API.STREAM.INFO.KV_<bucket>) or ask its leader to step down
// ($JS.API.STREAM.LEADER.STEPDOWN.KV_<bucket>); ErrBucketNotFound. Streams
// without a copy on server are left alone.
//
// It moves the buckets' streams only: the JetStream meta leadership
// (creating buckets and watches) is moved by the stopping server itself,
// without waiting (moving it needs the system account).
func (c *Client) HandOff(ctx context.Context, server string, buckets ...string) ([]Handoff, error) {
	if server == "" {
		return nil, fmt.Errorf("%w: hand off: no server named", ErrInvalidConfig)
	}
	done := make([]*Handoff, len(buckets))
	errs := make([]error, len(buckets))
	var wg sync.WaitGroup
	for i, bucket := range buckets {
		if !names.Plain(bucket, 0) {
			errs[i] = fmt.Errorf("%w: bucket name %q", ErrInvalidConfig, bucket)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			done[i], errs[i] = c.handOff(ctx, server, bucket)
		}()
	}
	wg.Wait()
	var handoffs []Handoff
	for _, h := range done {
		if h != nil {
			handoffs = append(handoffs, *h)
		}
	}
	return handoffs, errors.Join(errs...)
}

// offlineFor is how long every copy seen offline has been: the time since
// the most recent of them went.
func offlineFor(since map[string]time.Time) time.Duration {
	var least time.Duration = -1
	for _, t := range since {
		if d := time.Since(t); least < 0 || d < least {
			least = d
		}
	}
	return least
}

// handOff moves one bucket's stream off server; nil, nil when server does
// not lead it.
func (c *Client) handOff(ctx context.Context, server, bucket string) (*Handoff, error) {
	stream := "KV_" + bucket
	what := "hand off bucket " + bucket
	// A read in flight on the old leader is sent again as soon as the new
	// one is elected, instead of after its attempt's timeout.
	c.refusals.follow(stream)
	var (
		first, asked time.Time                // the first and the last step-down request
		leader       string                   // the leader last seen
		last         error                    // why the leader has not moved yet
		behind       = map[string]bool{}      // copies seen not current: catching up
		offline      = map[string]time.Time{} // copies seen offline, since when
	)
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		actx, cancel := context.WithTimeout(ctx, handOffAsk)
		info, err := c.streamInfo(actx, stream)
		cancel()
		var cl *jetstream.ClusterInfo
		if err == nil {
			cl = info.Cluster
			if cl == nil {
				cl = &jetstream.ClusterInfo{}
			}
			leader = cl.Leader
		}
		if cl != nil {
			for _, p := range cl.Replicas {
				if p != nil && (!p.Current || p.Offline) {
					behind[p.Name] = true
				}
				if p != nil && p.Offline {
					if _, ok := offline[p.Name]; !ok {
						offline[p.Name] = time.Now()
					}
				} else if p != nil {
					delete(offline, p.Name)
				}
			}
		}
		st := standIn(cl, server, behind)
		switch {
		case errors.Is(err, ErrBucketNotFound), errors.Is(err, ErrPermission), errors.Is(err, ErrJetStreamDisabled):
			return nil, err
		case err != nil:
			last = err
		case leader == "":
			last = errors.New("the stream has no leader")
		case leader != server && !first.IsZero():
			return &Handoff{Bucket: bucket, Stream: stream, From: server, To: leader, Took: time.Since(first)}, nil
		case !st.member:
			return nil, nil // no copy on server
		case st.others == 0:
			return nil, fmt.Errorf("%w: %s: no other server holds a copy of %s", ErrHandOff, what, stream)
		case st.online < st.need && offlineFor(offline) >= handOffOffline:
			// Waiting cannot help: the stream has no quorum without server
			// until servers known to be stopped are back.
			return nil, fmt.Errorf("%w: %s: %d of the %d other copies of %s are offline: without %s it has no quorum until they are back",
				ErrHandOff, what, st.others-st.online, st.others, stream, server)
		case st.current < st.need:
			last = fmt.Errorf("%d of the %d other copies of %s are current, %d are needed for a quorum without %s", st.current, st.others, stream, st.need, server)
		case leader != server:
			return nil, nil // a copy that the others can do without
		case asked.IsZero() || time.Since(asked) >= handOffResend:
			asked = time.Now()
			if first.IsZero() {
				first = asked
			}
			if err := c.stepDown(ctx, what, stream, st.peer); errors.Is(err, ErrPermission) {
				return nil, err
			} else if err != nil {
				last = err
			}
		}
		wait.Reset(handOffPoll)
		select {
		case <-ctx.Done():
			state := server + " still leads " + stream
			switch {
			case leader == "":
				state = "no server answered as leader of " + stream
			case leader != server:
				state = stream + " still needs the copy on " + server
			}
			if last != nil {
				return nil, fmt.Errorf("%w: %s: %s (%w): %w", ErrHandOff, what, state, last, ctx.Err())
			}
			return nil, fmt.Errorf("%w: %s: %s: %w", ErrHandOff, what, state, ctx.Err())
		case <-wait.C:
		}
	}
}

// standing is how a stream's copies other than server's stand.
type standing struct {
	member  bool   // server holds a copy
	others  int    // copies on other servers
	online  int    // of which on servers not known to be stopped
	current int    // of which current (see standIn)
	need    int    // current copies the stream needs to commit without server
	peer    string // the current copy best placed to lead
}

// standIn reports how the copies of the stream cl describes stand without
// server's: how many others are current, how many the stream needs to
// commit writes without server (a quorum of all its copies, or all the
// others when they are fewer), and which current copy is the best to lead
// it: the least behind, preferring one never seen behind, since a copy that
// has just caught up (its server restarted) can take a second longer to
// take the lead. A copy counts as current when it lacks no committed entry
// and answered its leader within handOffFresh; the leader, which answered,
// is current. A copy on a server just restarted may still be catching up:
// were server stopped before it has, every write of the stream would stall
// until it has.
func standIn(cl *jetstream.ClusterInfo, server string, behind map[string]bool) standing {
	var st standing
	if cl == nil || cl.Leader == "" {
		return st
	}
	st.member = cl.Leader == server
	if !st.member {
		st.others, st.online, st.current = 1, 1, 1
	}
	var best *jetstream.PeerInfo
	for _, p := range cl.Replicas {
		switch {
		case p == nil:
			continue
		case p.Name == server:
			st.member = true
			continue
		}
		st.others++
		if p.Offline {
			continue
		}
		st.online++
		if !p.Current || p.Pending || p.Active > handOffFresh {
			continue
		}
		st.current++
		if best == nil || better(p, best, behind) {
			best = p
		}
	}
	st.need = min((st.others+1)/2+1, st.others)
	if best != nil {
		st.peer = best.Name
	}
	return st
}

// better reports whether copy p is better placed to lead than q: not
// seen behind, then less behind, then heard from more recently.
func better(p, q *jetstream.PeerInfo, behind map[string]bool) bool {
	if behind[p.Name] != behind[q.Name] {
		return !behind[p.Name]
	}
	if p.Lag != q.Lag {
		return p.Lag < q.Lag
	}
	return p.Active < q.Active
}

type stepDownResponse struct {
	apiResponse
	Success bool `json:"success"`
}

// stepDown asks a stream's leader, once, to hand its leadership to peer.
// It is not sent again by itself: the caller reads who leads before it
// asks again, since a repeated request would be answered by the new leader.
func (c *Client) stepDown(ctx context.Context, what, stream, peer string) error {
	req := struct {
		Placement struct {
			Preferred string `json:"preferred"`
		} `json:"placement"`
	}{}
	req.Placement.Preferred = peer
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	subj := apiPrefix + "STREAM.LEADER.STEPDOWN." + stream
	actx, cancel := context.WithTimeout(ctx, handOffAsk)
	defer cancel()
	w := c.refusals.begin(subj, cancel)
	resp, err := c.nc.RequestWithContext(actx, subj, data)
	if err = c.refusals.end(w, err); err != nil {
		return c.requestError(what, err)
	}
	var out stepDownResponse
	if err := json.Unmarshal(resp.Data, &out); err != nil {
		return fmt.Errorf("%s: undecodable answer from %s: %w", what, c.url, err)
	}
	if out.Error != nil {
		return c.streamError(what, out.Error)
	}
	return nil
}
