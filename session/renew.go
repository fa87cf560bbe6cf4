package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/kv"
)

// ResumeOption configures Resume.
type ResumeOption func(*resumeConfig)

type resumeConfig struct{ fence uint64 }

// WithFence makes Resume refuse (ErrLost, LostTaken) a session whose fence
// is not f: the caller's session was replaced. Default: any fence.
func WithFence(f uint64) ResumeOption { return func(c *resumeConfig) { c.fence = f } }

// Resume returns this host's live session of slot, to Commit or Close it.
//
// A session of another host is a *HeldError with ErrForeignHost, unless this
// host's pid file shows it held the slot with another fence: then its
// session was taken over (*LostError). A slot without a live session is a
// *LostError (ErrLost) when the server still shows it expired or closed, or
// this host has a pid file of it, and ErrNotFound otherwise. A record that does not decode is a *HeldError with
// ErrUndecodable.
func (m *Manager) Resume(ctx context.Context, slot string, opts ...ResumeOption) (*Session, error) {
	var cfg resumeConfig
	for _, o := range opts {
		o(&cfg)
	}
	if err := validSlot(slot); err != nil {
		return nil, err
	}
	// The key had at least the revision of this host's own session (a fence
	// is a creation revision): in a cluster, an older answer (or none) is a
	// cut-off server's rather than a sign the session was lost. It is asked
	// again for a while (the leadership moves in well under that), and then
	// taken only from a server that has heard from most of the stream's
	// copies (the bucket was made anew, or the record's tombstone expired);
	// otherwise Resume is ErrUnavailable, and the caller tries again.
	var least uint64
	if t, ok := m.readPIDFile(slot); ok {
		least = t.Fence
	}
	e, err := m.bucket.LatestAtLeast(ctx, slot, least, staleReadWait)
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, err
	}
	if err != nil || !e.Live() {
		var last *kv.Entry
		if err == nil {
			last = &e
		}
		return nil, m.gone(slot, cfg.fence, last)
	}
	s, err := sessionOf(e)
	if err != nil {
		return nil, err
	}
	if s.Host != m.host {
		// This host held the slot (its pid file says so) and another host
		// has it now: this host's session was lost, not refused.
		if t, ok := m.readPIDFile(slot); ok && t.Fence != s.Fence {
			return nil, &LostError{Slot: slot, Fence: t.Fence, How: LostTaken, Now: s}
		}
		return nil, &HeldError{Slot: slot, Holder: s, Revision: s.Revision, Reason: ErrForeignHost}
	}
	if cfg.fence != 0 && s.Fence != cfg.fence {
		how := LostTaken
		if cfg.fence > s.Fence {
			how = LostGone // no session with that fence ever held it before this one
		}
		return nil, &LostError{Slot: slot, Fence: cfg.fence, How: how, Now: s}
	}
	return s, nil
}

// CommitSlot is Resume then Commit, and then records the new version in
// this host's pid file: it renews this host's session of slot, with the same
// outcomes and errors. While this host's pid file holds the slot's last
// revision (no other process renewed the session since this host's last
// write through the pid file), that is one compare-and-set on it and no read;
// a refused one leaves nothing written, and CommitSlot then reads as Resume
// does.
func (m *Manager) CommitSlot(ctx context.Context, slot, message string, opts ...ResumeOption) (*Session, error) {
	var cfg resumeConfig
	for _, o := range opts {
		o(&cfg)
	}
	if len(message) > MaxTaskLen {
		return nil, fmt.Errorf("%w: message longer than %d bytes", ErrInvalid, MaxTaskLen)
	}
	s, t, ok := m.fromPIDFile(slot, cfg.fence)
	if ok {
		out, err := m.Update(ctx, renewal(s, message, m.now()))
		if err == nil {
			m.writePIDFile(out, t.Joined)
			return out, nil
		}
		if !errors.Is(err, kv.ErrConflict) {
			return nil, err
		}
	}
	s, err := m.Resume(ctx, slot, opts...)
	if err != nil {
		return nil, err
	}
	out, err := m.Commit(ctx, s, message)
	if err != nil {
		return nil, err
	}
	if t.Slot == slot && t.Fence == out.Fence {
		m.writePIDFile(out, t.Joined) // as rewritePIDFile, with the pid file read above
	}
	return out, nil
}

// CloseSlot is Resume then Close: it ends this host's session of slot, with
// the same outcomes and errors, and returns the session it closed. Like
// CommitSlot, it is one compare-and-set and no read while this host's pid file
// holds the slot's last revision.
func (m *Manager) CloseSlot(ctx context.Context, slot, result string, opts ...ResumeOption) (*Session, error) {
	var cfg resumeConfig
	for _, o := range opts {
		o(&cfg)
	}
	if s, _, ok := m.fromPIDFile(slot, cfg.fence); ok {
		err := m.Delete(ctx, slot, s.Revision, closing(s, result, m.now()))
		if err == nil {
			m.removePIDFile(slot, s.Fence)
			return s, nil
		}
		if !errors.Is(err, kv.ErrConflict) {
			return nil, err
		}
	}
	s, err := m.Resume(ctx, slot, opts...)
	if err != nil {
		return nil, err
	}
	return s, m.Close(ctx, s, result)
}

// rewritePIDFile records s in this host's pid file of its slot when the file is of
// its session (same fence): so that the next CommitSlot or CloseSlot
// writes without a read.
func (m *Manager) rewritePIDFile(s *Session) {
	if t, ok := m.readPIDFile(s.Slot); ok && t.Fence == s.Fence {
		m.writePIDFile(s, t.Joined)
	}
}

// renewal is the next version of s that Commit writes.
func renewal(s *Session, message string, now time.Time) *Session {
	next := *s
	next.Record = s.Record.clone()
	next.Renewals++
	if message != "" {
		next.Message = message
	}
	next.RenewedAt = now.UTC()
	return &next
}

// closing is the record Close leaves in s's tombstone.
func closing(s *Session, result string, now time.Time) *Record {
	note := s.Record.clone()
	note.Result = result
	note.RenewedAt = now.UTC()
	return &note
}

// gone explains a slot without a live session: lost (with how and when) if
// anything shows it had one, else ErrNotFound.
func (m *Manager) gone(slot string, fence uint64, last *kv.Entry) error {
	t, hasFile := m.readPIDFile(slot)
	if fence == 0 && hasFile {
		fence = t.Fence
	}
	if last != nil {
		return &LostError{Slot: slot, Fence: fence, How: pastOp(last.Op), At: last.Created}
	}
	if hasFile || fence != 0 {
		return &LostError{Slot: slot, Fence: fence, How: LostGone}
	}
	return fmt.Errorf("%w: slot %s has no session", ErrNotFound, slot)
}

// staleReadWait bounds how long Resume asks again while the answer is older
// than this host's own session.
const staleReadWait = 2 * time.Second

// casAttempts bounds how often Commit and Close follow their own session to
// a newer revision (written by another process of this host).
const casAttempts = 4

// Commit renews s: a CAS update of its record (renewal count, message,
// renewed time) that restarts its TTL. An empty message keeps the last one.
// It returns the new version.
//
// If the record changed since s was read but is still the same session (same
// fence: another process of this host committed it), Commit follows it and
// retries. If the session expired, was closed, or another session took the
// slot, Commit returns a *LostError (ErrLost) and writes nothing: it never
// resurrects a record.
func (m *Manager) Commit(ctx context.Context, s *Session, message string) (*Session, error) {
	if len(message) > MaxTaskLen {
		return nil, fmt.Errorf("%w: message longer than %d bytes", ErrInvalid, MaxTaskLen)
	}
	cur := s
	for attempt := 1; ; attempt++ {
		out, err := m.Update(ctx, renewal(cur, message, m.now()))
		if err == nil {
			return out, nil
		}
		if cur, err = m.follow(s, err); err != nil {
			return nil, err
		}
		if attempt == casAttempts {
			return nil, fmt.Errorf("commit %s: the record kept changing: %w", s.Slot, kv.ErrConflict)
		}
	}
}

// Close ends s: a CAS delete that leaves a tombstone carrying the record
// with result, then removes this host's pid file. If another process of this
// host renewed the session meanwhile, Close follows it. A session already
// gone (expired or closed) is ErrNotFound; one replaced by another session
// is a *LostError, and that other session is left alone.
func (m *Manager) Close(ctx context.Context, s *Session, result string) error {
	cur := s
	for attempt := 1; ; attempt++ {
		err := m.Delete(ctx, s.Slot, cur.Revision, closing(cur, result, m.now()))
		if err == nil {
			m.removePIDFile(s.Slot, s.Fence)
			return nil
		}
		next, ferr := m.follow(s, err)
		var lost *LostError
		if errors.As(ferr, &lost) && lost.How != LostTaken {
			m.removePIDFile(s.Slot, s.Fence)
			return fmt.Errorf("%w: %w", ErrNotFound, ferr)
		}
		if ferr != nil {
			return ferr
		}
		if attempt == casAttempts {
			return fmt.Errorf("close %s: the record kept changing: %w", s.Slot, kv.ErrConflict)
		}
		cur = next
	}
}

// follow decides what a lost CAS on s means: the same session at a newer
// revision (returned, to retry on), or a *LostError.
func (m *Manager) follow(s *Session, err error) (*Session, error) {
	var ce *kv.ConflictError
	if !errors.As(err, &ce) {
		return nil, err
	}
	if ce.Current == nil || !ce.Current.Live() {
		lost := &LostError{Slot: s.Slot, Fence: s.Fence, How: LostGone}
		if ce.Current != nil {
			lost.How, lost.At = pastOp(ce.Current.Op), ce.Current.Created
		}
		return nil, lost
	}
	cur, derr := Decode(*ce.Current)
	if derr != nil || cur.Fence != s.Fence {
		return nil, &LostError{Slot: s.Slot, Fence: s.Fence, How: LostTaken, At: ce.Current.Created, Now: cur}
	}
	return cur, nil
}
