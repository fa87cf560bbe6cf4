package reserve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/names"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/limits"
	"github.com/batonhq/baton/reserve/pattern"
)

// DefaultPrefix names the bucket: <prefix>-limits.
const DefaultPrefix = "baton"

// DefaultTTL is a reservation's TTL when none is given.
const DefaultTTL = 30 * time.Second

// MaxPatterns bounds the patterns of one reservation.
const MaxPatterns = 64

// BucketConfig is the limits bucket's configuration (package limits),
// which reservation spaces share with semaphores and rate limiters.
func BucketConfig(prefix string, replicas int) kv.BucketConfig {
	return limits.BucketConfig(prefix, replicas)
}

// Spaces reserves, renews, releases and reads the path reservations of
// one prefix, as one host's process. It is safe for concurrent use.
type Spaces struct {
	bucket *kv.Bucket
	prefix string
	host   string
	proc   hostlocal.Process
	now    func() time.Time

	mu sync.Mutex
	// known is each space as this handle last read or wrote it, so that a
	// change is one compare-and-set while nobody else writes the space.
	known map[string]*state
	// parsed caches compiled patterns: the same few recur in every
	// revision of a space.
	parsed map[string]pattern.Pattern
	// seenAlive is when a holder's process on this host was last found
	// running, so that a write of a space of many reservations does not
	// look up each holder each time; a process found gone stays gone.
	seenAlive map[hostlocal.Process]time.Time
	gone      map[hostlocal.Process]bool

	// bufs are buffers a write's record is encoded into, and compiled
	// those its entries are compiled into.
	bufs, compiled sync.Pool
}

// aliveFor is how long a process found running counts as running without
// a look: a holder's death frees its reservations on its host that much
// later at most (a waiter's exit watch wakes it at once).
const aliveFor = 100 * time.Millisecond

// Option configures New.
type Option func(*Spaces) error

// WithPrefix sets the bucket prefix. Default: DefaultPrefix.
func WithPrefix(p string) Option {
	return func(s *Spaces) error {
		if !names.Plain(p, 64) {
			return fmt.Errorf("%w: prefix %q: use 1-64 letters, digits, '-' and '_'", ErrInvalid, p)
		}
		s.prefix = p
		return nil
	}
}

// WithHostID sets this host's id. Default: the hostname.
func WithHostID(id string) Option {
	return func(s *Spaces) error {
		h, err := hostlocal.HostID(id)
		if err != nil {
			return fmt.Errorf("%w: host id: %w", ErrInvalid, err)
		}
		s.host = h
		return nil
	}
}

// WithProcess sets the process recorded as the holder of reservations:
// the one whose death frees them at once on this host. Default: the
// calling process.
func WithProcess(p hostlocal.Process) Option {
	return func(s *Spaces) error { s.proc = p; return nil }
}

// WithClock sets the clock of the informational times written into
// records. It decides nothing. Default: time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Spaces) error { s.now = now; return nil }
}

// New returns the reservation spaces of c's server. It makes no round
// trip.
func New(c *kv.Client, opts ...Option) (*Spaces, error) {
	s := &Spaces{prefix: DefaultPrefix, now: time.Now, known: map[string]*state{}, parsed: map[string]pattern.Pattern{},
		seenAlive: map[hostlocal.Process]time.Time{}, gone: map[hostlocal.Process]bool{}}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	if s.host == "" {
		if err := WithHostID("")(s); err != nil {
			return nil, err
		}
	}
	if s.proc.PID == 0 {
		if self, err := hostlocal.Self(); err == nil {
			s.proc = self
		}
	}
	s.bucket = c.Bucket(BucketConfig(s.prefix, 0))
	return s, nil
}

// Ensure creates the limits bucket with replicas servers holding it, or
// reports (kv.ErrBucketMismatch) how an existing one differs.
func (s *Spaces) Ensure(ctx context.Context, replicas int) error {
	_, err := s.bucket.Client().Ensure(ctx, BucketConfig(s.prefix, replicas))
	return err
}

// Bucket is the limits bucket.
func (s *Spaces) Bucket() *kv.Bucket { return s.bucket }

// Host is this handle's host id.
func (s *Spaces) Host() string { return s.host }

// ValidSpace checks a space's name: 1-200 characters, printable, no
// spaces (a repository's id such as github.com/org/repo is one).
func ValidSpace(space string) error {
	if space == "" || len(space) > 200 || !utf8.ValidString(space) {
		return fmt.Errorf("%w: space %q: use 1-200 printable characters without spaces (a repository id such as github.com/org/repo)", ErrInvalid, space)
	}
	for _, r := range space {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: space %q: use 1-200 printable characters without spaces (a repository id such as github.com/org/repo)", ErrInvalid, space)
		}
	}
	return nil
}

// KeyPrefix begins the key of every space's record: resv.
const KeyPrefix = "resv."

// Key is the KV key of a space's record: resv.<space> for a space named
// with letters, digits, '-' and '_' (up to 64), else resv.= and a hash of
// the name (the record names its space in full).
func Key(space string) string {
	if names.Plain(space, 64) {
		return KeyPrefix + space
	}
	sum := sha256.Sum256([]byte(space))
	return KeyPrefix + "=" + hex.EncodeToString(sum[:12])
}

// state is a space as this handle knows it: read (exact: at is the
// server's time of rev) or written by this handle (at is the last exact
// time it knew, earlier than rev's).
type state struct {
	rec   Record
	rev   uint64 // the record's revision; for an absent one its tombstone's, or 0
	live  bool
	at    time.Time
	exact bool
	size  int // the record's bytes
}

// clone is a deep copy of st's entries, for a change to work on.
func (st *state) clone() Record {
	r := st.rec
	r.Entries = make([]Entry, len(st.rec.Entries), len(st.rec.Entries)+1)
	copy(r.Entries, st.rec.Entries)
	return r
}

// kept is a copy of st's record for a change to work on, without the
// entries prune drops at d.
func (st *state) kept(d time.Time, dead func(*Entry) bool) Record {
	r := st.rec
	r.Entries = keep(make([]Entry, 0, len(st.rec.Entries)+1), st.rec.Entries, d, dead)
	return r
}

// waits reports whether an entry of r waits.
func (r *Record) waits() bool {
	for i := range r.Entries {
		if r.Entries[i].Waiting {
			return true
		}
	}
	return false
}

// find is the index of entry id, or -1.
func (r *Record) find(id string) int {
	for i := len(r.Entries) - 1; i >= 0; i-- { // the latest come last
		if r.Entries[i].ID == id {
			return i
		}
	}
	return -1
}

// stateOf turns a read of the space's key into a state, each entry's
// bytes memoised for the writes it starts.
func stateOf(space string, e kv.Entry) (*state, error) { return decodeState(space, e, true) }

// decodeState is stateOf, the entries memoised or not.
func decodeState(space string, e kv.Entry, memoise bool) (*state, error) {
	st := &state{rev: e.Revision, at: e.Created, exact: true, size: len(e.Value)}
	if !e.Live() {
		st.rec.Space = space
		return st, nil
	}
	st.live = true
	if rec, ok := decodeRecord(e.Value, memoise); ok {
		st.rec = rec
	} else if err := st.rec.UnmarshalJSON(e.Value); err != nil {
		return nil, fmt.Errorf("%w: space %s, revision %d: %w", ErrUndecodable, space, e.Revision, err)
	}
	if st.rec.Space != space {
		return nil, fmt.Errorf("%w: %s holds space %q, not %q", ErrUndecodable, e.Key, st.rec.Space, space)
	}
	resolve(&st.rec, e.Revision, e.Created, true)
	return st, nil
}

// read reads the space from the stream leader.
func (s *Spaces) read(ctx context.Context, space string) (*state, error) {
	e, err := s.bucket.Latest(ctx, Key(space))
	if errors.Is(err, kv.ErrNotFound) {
		st := &state{exact: true} // never written: nothing to prune, no time needed
		st.rec.Space = space
		s.remember(space, st)
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := stateOf(space, e)
	if err != nil {
		return nil, err
	}
	s.remember(space, st)
	return st, nil
}

// last is the space as last known, read if not known.
func (s *Spaces) last(ctx context.Context, space string) (*state, error) {
	s.mu.Lock()
	st := s.known[space]
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	return s.read(ctx, space)
}

// remember keeps st as the space's last known state, unless a later one is
// known.
func (s *Spaces) remember(space string, st *state) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.known[space]; cur == nil || cur.rev <= st.rev {
		s.known[space] = st
	}
}

// compile parses the patterns of each entry of r, a record no other
// goroutine sees, appending them to dst[:0]: from the entry's memo when it
// has them, else parsed and memoised.
func (s *Spaces) compile(dst []compiled, r *Record) ([]compiled, error) {
	return s.compileAs(dst, r, true)
}

// compiledBuf is a buffer for compile, empty.
func (s *Spaces) compiledBuf() []compiled {
	if b, ok := s.compiled.Get().(*[]compiled); ok {
		return (*b)[:0]
	}
	return nil
}

// keepCompiledBuf keeps cs's array for the next compile, holding nothing.
func (s *Spaces) keepCompiledBuf(cs []compiled) {
	clear(cs)
	s.compiled.Put(&cs)
}

// compileShared is compile for a record others may be reading (a state
// this handle knows): it memoises nothing.
func (s *Spaces) compileShared(r *Record) ([]compiled, error) {
	return s.compileAs(nil, r, false)
}

func (s *Spaces) compileAs(dst []compiled, r *Record, keep bool) ([]compiled, error) {
	out := dst[:0]
	if cap(out) < len(r.Entries) {
		out = make([]compiled, 0, len(r.Entries)+1)
	}
	for i := range r.Entries {
		e := &r.Entries[i]
		pats, pres, err := e.compiledPatterns(s.parse, keep)
		if err != nil {
			return nil, fmt.Errorf("%w: space %s, reservation %s: %w", ErrUndecodable, r.Space, e.ID, err)
		}
		out = append(out, compiled{e: e, pats: pats, pres: pres})
	}
	return out, nil
}

// parse parses a pattern (cached: the same ones recur in every revision of
// a space, and in entries this handle has not seen).
func (s *Spaces) parse(p string) (pattern.Pattern, error) {
	s.mu.Lock()
	c, ok := s.parsed[p]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := pattern.Parse(p)
	if err != nil {
		return pattern.Pattern{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.parsed) > 1<<16 {
		clear(s.parsed)
	}
	s.parsed[p] = c
	return c, nil
}

// deadHere reports whether e's holder is a process of this host that is
// gone (its pid and start token, this boot), with its command's process
// group if it named one.
func (s *Spaces) deadHere(e *Entry) bool { return s.deadBy(e, s.runs) }

// deadNow is deadHere for the entries of one write: each process is
// looked up once.
func (s *Spaces) deadNow() func(*Entry) bool {
	var seen map[hostlocal.Process]bool
	var last hostlocal.Process // and whether it runs: a holder's entries often come together
	var lastRuns bool
	runs := func(p hostlocal.Process) bool {
		if p == last {
			return lastRuns
		}
		r, ok := seen[p]
		if !ok {
			if seen == nil {
				seen = map[hostlocal.Process]bool{}
			}
			r = s.runs(p)
			seen[p] = r
		}
		last, lastRuns = p, r
		return r
	}
	return func(e *Entry) bool { return s.deadBy(e, runs) }
}

// runs reports whether p may be running: a process of another boot (or
// of a platform that cannot tell) may be, as far as this host can say.
func (s *Spaces) runs(p hostlocal.Process) bool { return !p.ThisBoot() || s.alive(p) }

func (s *Spaces) deadBy(e *Entry, runs func(hostlocal.Process) bool) bool {
	if e.Host != s.host || e.PID <= 0 {
		return false
	}
	if runs(hostlocal.Process{PID: e.PID, Start: e.PIDStart}) {
		return false
	}
	if e.ChildPID > 0 && (runs(hostlocal.Process{PID: e.ChildPID, Start: e.ChildPIDStart}) || hostlocal.GroupRunning(e.ChildPID)) {
		return false
	}
	return true
}

// markGone records processes seen to exit, so that the next write frees
// what they held without waiting for a look.
func (s *Spaces) markGone(ps []hostlocal.Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range ps {
		s.gone[p] = true
		delete(s.seenAlive, p)
	}
}

// alive reports whether p runs, looking it up at most every aliveFor.
func (s *Spaces) alive(p hostlocal.Process) bool {
	now := time.Now()
	s.mu.Lock()
	seen, gone := s.seenAlive[p], s.gone[p]
	s.mu.Unlock()
	if gone {
		return false
	}
	if now.Sub(seen) < aliveFor {
		return true
	}
	ok := p.Alive()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seenAlive) > 4096 {
		clear(s.seenAlive)
	}
	if len(s.gone) > 4096 {
		clear(s.gone)
	}
	if ok {
		s.seenAlive[p] = now
	} else {
		s.gone[p] = true
		delete(s.seenAlive, p)
	}
	return ok
}

// errUnchanged, returned by a change, writes nothing.
var errUnchanged = errors.New("unchanged")

// change applies f to the space as last known, at a decision time no
// later than the write's, after pruning the entries expired at it and
// those of dead holders on this host, then promotes the waiting entries
// now free, and writes the result by compare-and-set. A lost
// compare-and-set carries the record in the way, and f runs again on it.
// f returns errUnchanged to write nothing (change then returns the state
// f saw, and nil); any other error ends the change.
//
// The decision time d is the latest exact time known of the space, or
// floor if later: a reading of the server's clock, for a decision that
// the age of the record may have made wrong.
func (s *Spaces) change(ctx context.Context, space, writer string, floor time.Time, f func(r *Record, cs []compiled, d time.Time) error) (*state, error) {
	return s.changeWith(ctx, space, writer, floor, true, f)
}

// changeWith is change, f given the entries compiled (cs) only if
// precompile: a change of one's own entry (a renewal, a release) decides
// nothing against the others, and one that does may compile as it goes
// (blockersIn). The entries are compiled after f all the same when some
// entry waits, to promote those now free.
func (s *Spaces) changeWith(ctx context.Context, space, writer string, floor time.Time, precompile bool, f func(r *Record, cs []compiled, d time.Time) error) (*state, error) {
	st, err := s.last(ctx, space)
	if err != nil {
		return nil, err
	}
	lost := 0
	for {
		d := st.at
		if floor.After(d) {
			d = floor
		}
		next := st.kept(d, s.deadNow())
		next.Space = space
		var cs []compiled
		if precompile {
			if cs, err = s.compile(s.compiledBuf(), &next); err != nil {
				return nil, err
			}
			defer s.keepCompiledBuf(cs)
		}
		if err := f(&next, cs, d); err != nil {
			if errors.Is(err, errUnchanged) {
				return st, nil
			}
			return st, err
		}
		if next.waits() {
			if cs, err = s.compile(cs, &next); err != nil {
				return nil, err
			}
			promote(cs)
		}
		next.Writer, next.WrittenAt = writer, s.now()
		written, err := s.put(ctx, st, &next, d)
		var ce *kv.ConflictError
		switch {
		case err == nil:
			s.remember(space, written)
			return written, nil
		case errors.As(err, &ce) && ctx.Err() == nil:
			if st, err = s.fromConflict(ctx, space, ce); err != nil {
				return nil, err
			}
			lost++
			if err := backoff(ctx, lost, st.size); err != nil {
				return nil, err
			}
		default:
			return nil, err
		}
	}
}

// fromConflict is the state a lost compare-and-set found in the way.
func (s *Spaces) fromConflict(ctx context.Context, space string, ce *kv.ConflictError) (*state, error) {
	if ce.Current == nil {
		return s.read(ctx, space)
	}
	st, err := stateOf(space, *ce.Current)
	if err != nil {
		return nil, err
	}
	s.remember(space, st)
	return st, nil
}

// put writes next over st: a delete when it holds nothing, else the
// record with a TTL no shorter than its longest-lived entry's.
func (s *Spaces) put(ctx context.Context, st *state, next *Record, d time.Time) (*state, error) {
	key := Key(next.Space)
	if len(next.Entries) == 0 {
		out := &state{rec: Record{Space: next.Space}, at: d}
		if !st.live {
			out.rev = st.rev
			return out, nil
		}
		tomb, err := s.bucket.DeleteRevision(ctx, key, st.rev, []byte(next.Writer+" "+next.WrittenAt.Format(time.RFC3339Nano)))
		if err != nil {
			return nil, err
		}
		out.rev = tomb
		return out, nil
	}
	buf, _ := s.bufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	data, err := next.encode(*buf)
	if err != nil {
		return nil, err
	}
	defer func() {
		// The write is sent and answered: nothing holds data now.
		*buf = data[:0]
		s.bufs.Put(buf)
	}()
	ttl := recordTTL(next, d)
	var rev uint64
	switch {
	case st.live:
		rev, err = s.bucket.Update(ctx, key, data, ttl, st.rev)
	case st.rev > 0:
		rev, err = s.bucket.CreateAfter(ctx, key, data, ttl, st.rev)
	default:
		rev, err = s.bucket.Create(ctx, key, data, ttl)
	}
	if errors.Is(err, kv.ErrTooLarge) {
		return nil, fmt.Errorf("%w: space %s: its record would be %d bytes with %d reservations; release some, or split the space (one per top-level directory)",
			ErrSpaceFull, next.Space, len(data), len(next.Entries))
	}
	if err != nil {
		return nil, err
	}
	out := &state{rec: *next, rev: rev, live: true, at: d, size: len(data)}
	resolve(&out.rec, rev, time.Time{}, false)
	return out, nil
}

// recordTTL is the TTL of the record: no shorter than its longest-lived
// entry's time left, counted from d (no later than the write), so that
// the server removes the record only once every entry has expired.
func recordTTL(r *Record, d time.Time) time.Duration {
	var longest time.Duration
	for i := range r.Entries {
		e := &r.Entries[i]
		left := e.ttl()
		if !e.Renewed.IsZero() {
			left += e.Renewed.Sub(d)
		}
		longest = max(longest, left)
	}
	return (longest + 2*time.Second).Truncate(time.Second)
}

// backoff sleeps after the lost-th compare-and-set lost in a row, a
// random time up to 100 µs times 2^(lost-1), at most a ceiling that grows
// with the record's size: 100 ms per 32 KiB of it, from 100 ms to 2 s.
// Every loser reads the record again (the conflict carries it), so the
// writers of a busy space spread their attempts over what that many
// writes and reads of its record cost the server; a short ceiling left
// many writers retrying faster than the server could answer
// (adr/0056, Bounds).
func backoff(ctx context.Context, lost, size int) error {
	ceiling := min(max(time.Duration(size)*100*time.Millisecond/(32<<10), 100*time.Millisecond), 2*time.Second)
	t := time.NewTimer(rand.N(min(100*time.Microsecond<<min(lost-1, 20), ceiling)))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// describe names a holder for people: agent, task, host and pid.
func describe(e *Entry) string {
	var b strings.Builder
	if e.Agent != "" {
		fmt.Fprintf(&b, "agent %s, ", e.Agent)
	}
	if e.Task != "" {
		fmt.Fprintf(&b, "task %s, ", e.Task)
	}
	fmt.Fprintf(&b, "host %s, pid %d", e.Host, e.PID)
	return b.String()
}
