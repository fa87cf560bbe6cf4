package kv

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Op says what an entry's revision did to its key.
type Op uint8

const (
	// OpPut is a live value.
	OpPut Op = iota
	// OpDelete is a tombstone written by a client (a delete or purge).
	OpDelete
	// OpExpire is the marker the server writes when the key's TTL ran out.
	OpExpire
)

func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpExpire:
		return "expire"
	default:
		return fmt.Sprintf("op(%d)", uint8(o))
	}
}

// Entry is one revision of a key as the server stores it.
type Entry struct {
	Key      string
	Value    []byte
	Revision uint64
	// Created is the server's time of this revision.
	Created time.Time
	Op      Op
	// TTL is the key's own TTL as stored with this revision (0: none).
	TTL time.Duration
}

// Live reports whether the entry holds a value (not a tombstone).
func (e Entry) Live() bool { return e.Op == OpPut }

// ExpiresAt is when the server will remove the key unless it is rewritten
// (the zero time when the entry has no TTL).
func (e Entry) ExpiresAt() time.Time {
	if e.TTL <= 0 {
		return time.Time{}
	}
	return e.Created.Add(e.TTL)
}

// Header names of the JetStream KV conventions and of the server.
const (
	hdrKVOperation    = "KV-Operation"
	hdrMarkerReason   = "Nats-Marker-Reason"
	hdrTTL            = "Nats-TTL"
	hdrRollup         = "Nats-Rollup"
	hdrExpectedLastSS = "Nats-Expected-Last-Subject-Sequence"
	kvOpDelete        = "DEL"
	kvOpPurge         = "PURGE"
	rollupSubject     = "sub"
)

// opFromHeader classifies a stored message by its headers.
func opFromHeader(h nats.Header) Op {
	if len(h) == 0 {
		return OpPut
	}
	switch h.Get(hdrKVOperation) {
	case kvOpDelete, kvOpPurge:
		return OpDelete
	}
	switch h.Get(hdrMarkerReason) {
	case "MaxAge":
		return OpExpire
	case "Purge", "Remove":
		return OpDelete
	}
	return OpPut
}

// ttlFromHeader reads the per-message TTL; "never" and garbage read as 0.
// A reader of many entries passes the TTL it read last (ttls, or nil),
// which most of them repeat: it is then not parsed again.
func ttlFromHeader(h nats.Header, ttls *lastTTL) time.Duration {
	v := h.Get(hdrTTL)
	switch {
	case v == "":
		return 0
	case ttls == nil:
		return ttlOf(v)
	case v != ttls.text:
		ttls.text, ttls.ttl = v, ttlOf(v)
	}
	return ttls.ttl
}

// lastTTL is the TTL header a reader read last, and its value.
type lastTTL struct {
	text string
	ttl  time.Duration
}

// ttlOf reads a TTL header's value, as ttlFromHeader.
func ttlOf(v string) time.Duration {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	var secs int64
	if _, err := fmt.Sscanf(v, "%d", &secs); err == nil && secs > 0 {
		return time.Duration(secs) * time.Second
	}
	return 0
}

// MaxKeyLen is the longest key ValidateKey accepts.
const MaxKeyLen = 128

// KeyRule describes valid keys, for error messages.
const KeyRule = "1-128 characters of A-Z a-z 0-9 - _ = . with no leading or trailing '.' and no '..'"

// ValidateKey checks a key (a slot or lease name) against KeyRule. The error
// wraps ErrInvalidKey and quotes the rule.
func ValidateKey(key string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: %q %s; use %s", ErrInvalidKey, key, why, KeyRule)
	}
	switch {
	case key == "":
		return bad("is empty")
	case len(key) > MaxKeyLen:
		return bad(fmt.Sprintf("is %d characters long", len(key)))
	case key[0] == '.' || key[len(key)-1] == '.':
		return bad("starts or ends with '.'")
	case strings.Contains(key, ".."):
		return bad("contains '..'")
	}
	for _, r := range key {
		if !keyChar(r) {
			return bad(fmt.Sprintf("contains %q", r))
		}
	}
	return nil
}

// maxStoredKeyLen bounds the keys this package stores: names that layers
// above build from a user's key (leader.KEY, candidate.KEY.INSTANCE) may be
// longer than a user's key.
const maxStoredKeyLen = 512

// validStoredKey checks a key the bucket operations accept: KeyRule's
// characters and dots, up to maxStoredKeyLen.
func validStoredKey(key string) error {
	if key == "" || len(key) > maxStoredKeyLen || key[0] == '.' || key[len(key)-1] == '.' || strings.Contains(key, "..") {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for _, r := range key {
		if !keyChar(r) {
			return fmt.Errorf("%w: %q contains %q", ErrInvalidKey, key, r)
		}
	}
	return nil
}

func keyChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
		r == '-' || r == '_' || r == '=' || r == '.'
}

// ValidateTTL checks that d is usable as a key TTL: a whole number of
// seconds, at least one second (the server's granularity).
func ValidateTTL(d time.Duration) error {
	if d < time.Second || d%time.Second != 0 {
		return fmt.Errorf("%w: %s; a TTL is a whole number of seconds, at least 1s", ErrInvalidTTL, d)
	}
	return nil
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

// ackFields reads a consumer delivery's stream sequence, timestamp (Unix
// nanoseconds) and pending count from its reply subject, as nats.go's
// Msg.Metadata does but without building the metadata (a listing reads one
// per key):
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>...]
//
// ok is false for any other subject (Metadata then decides) or a number
// that does not parse.
func ackFields(reply string) (seq uint64, ts int64, pending uint64, ok bool) {
	const prefix = "$JS.ACK."
	if !strings.HasPrefix(reply, prefix) {
		return 0, 0, 0, false
	}
	tokens := strings.Count(reply, ".") + 1
	// The tokens before <sseq>: 5 in the first form, 7 in the second.
	skip := 5
	switch {
	case tokens == 9:
	case tokens >= 11:
		skip = 7
	default:
		return 0, 0, 0, false
	}
	rest := reply
	for range skip {
		i := strings.IndexByte(rest, '.')
		rest = rest[i+1:]
	}
	var f [4]uint64 // sseq, cseq, tm, pending
	for i := range f {
		tok := rest
		if j := strings.IndexByte(rest, '.'); j >= 0 {
			tok, rest = rest[:j], rest[j+1:]
		}
		n, good := ackNum(tok)
		if !good {
			return 0, 0, 0, false
		}
		f[i] = n
	}
	return f[0], int64(f[2]), f[3], true
}

// ackNum parses a decimal number of an ack subject.
func ackNum(s string) (uint64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
