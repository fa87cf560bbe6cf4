package session

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

// decodeSeeds are records for FuzzDecodeRecord, and whether they decode.
func decodeSeeds() []decodeSeed {
	return []decodeSeed{
		{`{"slot":"rendering","task_id":"T-42","agent_id":"claude-1","host":"build-7","pid":4242,"pid_start":"123",` +
			`"instance":"i-1","fence":0,"started_at":"2026-01-02T03:04:05.123456789Z","renewed_at":"2026-01-02T03:04:05Z",` +
			`"renewals":0,"message":"","result":"","meta":{"k":"v"}}`, 7, true},
		{`{"slot":"rendering","fence":3,"renewals":2,"message":"halfway","started_at":"2026-01-02T03:04:05+01:00","meta":null}`, 9, true},
		{`{"slot":"rendering","host":"h","result":"success","future":{"lease":[1,2]},"z":"<keep>"}`, 12, true},
		{`{"slot":"rendering","Message":"case","zz":true}`, 1, true},
		{`{"slot":"rendering"}`, 0, true},
		// Undecodable, or another slot's.
		{``, 1, false}, {`null`, 1, false}, {`[]`, 1, false}, {`{"slot":"other"}`, 2, false}, {`{"slot":"rendering","pid":"x"}`, 3, false},
		{`{"slot":"rendering","started_at":"yesterday"}`, 4, false}, {`{"slot":"rendering"}{}`, 5, false},
		{`{"slot":"rendering","fence":-1}`, 6, false}, {"\xff", 7, false},
	}
}

type decodeSeed struct {
	value string
	rev   uint64
	ok    bool
}

// TestDecodeRecord_Seeds pins which seeds of FuzzDecodeRecord decode.
func TestDecodeRecord_Seeds(t *testing.T) {
	for _, seed := range decodeSeeds() {
		_, err := sessionOf(kv.Entry{Key: "rendering", Value: []byte(seed.value), Revision: seed.rev})
		if (err == nil) != seed.ok {
			t.Errorf("sessionOf(%q) = %v, want ok=%v", seed.value, err, seed.ok)
		}
	}
}

// FuzzDecodeRecord feeds arbitrary bytes to the decoding of a slot's entry.
// It either fails closed (a *HeldError with ErrUndecodable, naming the slot
// and revision) or gives the slot's session; that session encodes, decodes
// to the same session and encodes to the same bytes again; and a renewal's
// rewrite reads back with its new values and every field this version does
// not know.
func FuzzDecodeRecord(f *testing.F) {
	for _, seed := range decodeSeeds() {
		f.Add([]byte(seed.value), seed.rev)
	}
	f.Fuzz(func(t *testing.T, value []byte, rev uint64) {
		e := kv.Entry{Key: "rendering", Value: value, Revision: rev, Created: time.Unix(1700000000, 0), TTL: time.Minute}
		s, err := sessionOf(e)
		if err != nil {
			var held *HeldError
			if !errors.Is(err, ErrUndecodable) || !errors.As(err, &held) || held.Holder != nil ||
				held.Slot != e.Key || held.Revision != rev || held.Decode == nil {
				t.Fatalf("sessionOf(%q) = %#v; want a *HeldError with ErrUndecodable naming the slot and revision", value, err)
			}
			if !strings.Contains(err.Error(), "does not decode") {
				t.Fatalf("sessionOf(%q) error %q does not say the record does not decode", value, err)
			}
			return
		}
		if s.Slot != e.Key || s.Revision != rev || s.TTL != e.TTL || !s.Written.Equal(e.Created) || rev != 0 && s.Fence == 0 {
			t.Fatalf("sessionOf(%q) = %+v; want slot %s, revision %d, a fence", value, s, e.Key, rev)
		}

		b, err := encodeRecord(s.Record)
		if err != nil || !json.Valid(b) {
			t.Fatalf("a record that decodes does not encode: %q: %s, %v", value, b, err)
		}
		again, err := sessionOf(kv.Entry{Key: e.Key, Value: b, Revision: rev})
		if err != nil {
			t.Fatalf("decode(encode(decode(%q))) = %v; wrote %s", value, err, b)
		}
		if !sameRecord(again.Record, s.Record) {
			t.Fatalf("round trip of %q through %s:\n got %+v\nwant %+v", value, b, again.Record, s.Record)
		}
		if b2, err := encodeRecord(again.Record); err != nil || string(b2) != string(b) {
			t.Fatalf("encoding is not stable: %s, then %s (%v)", b, b2, err)
		}

		// A renewal, as Commit writes it, reads back with its values.
		next := s.Record.clone()
		next.Renewals++
		next.Message = "renewed"
		next.RenewedAt = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
		b, err = encodeRecord(next)
		if err != nil {
			t.Fatalf("encode a renewal of %q: %v", value, err)
		}
		renewed, err := sessionOf(kv.Entry{Key: e.Key, Value: b, Revision: rev + 1})
		if err != nil {
			t.Fatalf("a renewal of %q does not decode: %v; wrote %s", value, err, b)
		}
		if next.Fence == 0 {
			next.Fence = rev + 1 // the revision a renewal of a first revision is at
		}
		if !sameRecord(renewed.Record, next) {
			t.Fatalf("renewal of %q wrote %s:\n got %+v\nwant %+v", value, b, renewed.Record, next)
		}
	})
}

// sameRecord compares two records by meaning: times by instant, a nil map
// as an empty one, unknown fields by their JSON values.
func sameRecord(a, b Record) bool {
	norm := func(r Record) Record {
		r.StartedAt, r.RenewedAt = r.StartedAt.UTC(), r.RenewedAt.UTC()
		if len(r.Meta) == 0 {
			r.Meta = nil
		}
		r.unknown = nil
		return r
	}
	return reflect.DeepEqual(norm(a), norm(b)) && sameJSONFields(a.unknown, b.unknown)
}

func sameJSONFields(a, b map[string]json.RawMessage) bool {
	return maps.EqualFunc(a, b, func(x, y json.RawMessage) bool {
		var vx, vy any
		return json.Unmarshal(x, &vx) == nil && json.Unmarshal(y, &vy) == nil && reflect.DeepEqual(vx, vy)
	})
}

// FuzzValidateNames checks the names a Manager takes. A slot is accepted
// exactly when nats.go's jetstream accepts it as a key and it follows
// kv.KeyRule (no '/', at most kv.MaxKeyLen); a prefix exactly when it is
// 1-64 letters, digits, '-' or '_', and then both buckets' names are valid;
// a host id when it is not blank, and the session records it writes are
// then recognised as its own when read back. Every refusal is ErrInvalid
// and states the rule.
func FuzzValidateNames(f *testing.F) {
	for _, seed := range []string{
		"rendering", "a", "A-Z_a-z=0.9", "team.bot.1", strings.Repeat("s", kv.MaxKeyLen), "build-7", "  spaced  ",
		"", ".", "a.", ".a", "a..b", "a/b", "a b", "a*", "a>", "é", "a\x00", strings.Repeat("s", kv.MaxKeyLen+1),
		strings.Repeat("p", 65), "baton-2", "h\u00a0h", "\u2028",
	} {
		f.Add(seed)
	}
	state, err := hostlocal.OpenStateDir(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string) {
		// Slots, and the gate and pid file named after them.
		err := validSlot(name)
		want := kvtest.NATSKeyValid(name) && !strings.Contains(name, "/") && len(name) <= kv.MaxKeyLen
		if (err == nil) != want {
			t.Fatalf("validSlot(%q) = %v; want ok=%v (jetstream and kv.KeyRule)", name, err, want)
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !errors.Is(err, kv.ErrInvalidKey) || !strings.Contains(err.Error(), kv.KeyRule)) {
			t.Fatalf("validSlot(%q) = %v; want ErrInvalid and kv.ErrInvalidKey, quoting the rule", name, err)
		}
		if err == nil {
			var tr pidRecord
			if err := state.ReadPIDFile(DefaultPrefix, gateName(name), &tr); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("slot %q: reading its pid file = %v; want fs.ErrNotExist (a valid gate name)", name, err)
			}
		}

		// Prefixes.
		var m Manager
		err = WithPrefix(name)(&m)
		want = len(name) <= 64 && kvtest.NATSBucketValid(name)
		if (err == nil) != want || (ValidatePrefix(name) == nil) != want {
			t.Fatalf("WithPrefix(%q) = %v; want ok=%v", name, err, want)
		}
		if err == nil && (m.prefix != name || !kvtest.NATSBucketValid(BucketConfig(name, 0).Name)) {
			t.Fatalf("WithPrefix(%q) set %q, bucket %q", name, m.prefix, BucketConfig(name, 0).Name)
		}
		if err == nil {
			var tr pidRecord
			if err := state.ReadPIDFile(name, gateName("rendering"), &tr); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("prefix %q: reading a pid file of its group = %v; want fs.ErrNotExist (a valid group name)", name, err)
			}
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "1-64 letters, digits, '-' and '_'")) {
			t.Fatalf("WithPrefix(%q) = %v; want ErrInvalid stating the rule", name, err)
		}

		// Instance ids.
		if err := WithInstance(name)(&m); (err == nil) != (name != "") || err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("WithInstance(%q) = %v", name, err)
		}

		// Host ids (a blank one means the hostname).
		if strings.TrimSpace(name) == "" {
			return
		}
		err = WithHostID(name)(&m)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !errors.Is(err, hostlocal.ErrInvalidName) || !strings.Contains(err.Error(), "host id") {
				t.Fatalf("WithHostID(%q) = %v; want ErrInvalid and hostlocal.ErrInvalidName", name, err)
			}
			return
		}
		if m.host != strings.TrimSpace(name) {
			t.Fatalf("WithHostID(%q) set %q", name, m.host)
		}
		b, err := encodeRecord(Record{Slot: "rendering", Host: m.host})
		if err != nil {
			t.Fatal(err)
		}
		s, err := sessionOf(kv.Entry{Key: "rendering", Value: b, Revision: 1})
		if err != nil {
			t.Fatalf("a session of host %q does not decode: %v", m.host, err)
		}
		if s.Host != m.host {
			t.Fatalf("host id %q is written as %s and read back as %q: this host would not know its own session", m.host, b, s.Host)
		}
	})
}
