package lease

import (
	"encoding/json"
	"errors"
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
		{`{"key":"deploy","holder":"i-1","host":"build-7","pid":4242,"pid_start":"123","child_pid":0,"fence":0,"ttl":"10s",` +
			`"acquired_at":"2026-01-02T03:04:05.5Z","renewed_at":"2026-01-02T03:04:05Z","renewals":0,"transfer_to":"",` +
			`"score":5,"capabilities":["gpu"],"meta":{"k":"v"}}`, 7, true},
		{`{"key":"deploy","holder":"i-2","fence":3,"ttl":5000000000,"prev_holder":"i-1","prev_fence":2,"chosen":true,"capabilities":null}`, 9, true},
		{`{"key":"deploy","holder":"i-3","ttl":"-9223372036854775808ns","renewed_at":"2026-01-02T03:04:05-07:00","future":[{"x":1}]}`, 12, true},
		{`{"key":"deploy","holder":"i-4","TransferTo":"i-5","zz":"<keep>"}`, 1, true},
		{`{"key":"deploy","holder":"h"}`, 0, true},
		// Undecodable, another key's, or nobody's.
		{``, 1, false}, {`null`, 1, false}, {`{}`, 1, false}, {`{"key":"deploy"}`, 2, false}, {`{"key":"other","holder":"h"}`, 3, false},
		{`{"key":"deploy","holder":"h","ttl":"soon"}`, 4, false}, {`{"key":"deploy","holder":"h","ttl":1.5}`, 5, false},
		{`{"key":"deploy","holder":"h","ttl":null}`, 6, false}, {`{"key":"deploy","holder":"h"} {}`, 7, false},
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
		_, err := infoOf(kv.Entry{Key: "deploy", Value: []byte(seed.value), Revision: seed.rev})
		if (err == nil) != seed.ok {
			t.Errorf("infoOf(%q) = %v, want ok=%v", seed.value, err, seed.ok)
		}
	}
}

// FuzzDecodeRecord feeds arbitrary bytes to the decoding of a lease's
// entry. It either fails closed (a *HeldError with ErrUndecodable, naming
// the key and revision) or gives a lease of that key with a holder; that
// lease encodes, decodes to the same lease and encodes to the same bytes
// again; and a renewal or a transfer request reads back with its new values
// and every field this version does not know.
func FuzzDecodeRecord(f *testing.F) {
	for _, seed := range decodeSeeds() {
		f.Add([]byte(seed.value), seed.rev)
	}
	f.Fuzz(func(t *testing.T, value []byte, rev uint64) {
		e := kv.Entry{Key: "deploy", Value: value, Revision: rev, Created: time.Unix(1700000000, 0), TTL: time.Minute}
		in, err := infoOf(e)
		if err != nil {
			var held *HeldError
			if !errors.Is(err, ErrUndecodable) || !errors.As(err, &held) || held.Holder != nil ||
				held.Key != e.Key || held.Revision != rev || held.Decode == nil {
				t.Fatalf("infoOf(%q) = %#v; want a *HeldError with ErrUndecodable naming the key and revision", value, err)
			}
			if !strings.Contains(err.Error(), "does not decode") {
				t.Fatalf("infoOf(%q) error %q does not say the record does not decode", value, err)
			}
			return
		}
		if in.Key != e.Key || in.Holder == "" || in.Revision != rev || in.TTL != e.TTL || !in.Written.Equal(e.Created) || rev != 0 && in.Fence == 0 {
			t.Fatalf("infoOf(%q) = %+v; want key %s, a holder, revision %d, a fence", value, in, e.Key, rev)
		}

		b, err := encode(in.Record)
		if err != nil || !json.Valid(b) {
			t.Fatalf("a record that decodes does not encode: %q: %s, %v", value, b, err)
		}
		checkAppendJSON(t, in.Record)
		again, err := infoOf(kv.Entry{Key: e.Key, Value: b, Revision: rev})
		if err != nil {
			t.Fatalf("decode(encode(decode(%q))) = %v; wrote %s", value, err, b)
		}
		if !sameRecord(again.Record, in.Record) {
			t.Fatalf("round trip of %q through %s:\n got %+v\nwant %+v", value, b, again.Record, in.Record)
		}
		if b2, err := encode(again.Record); err != nil || string(b2) != string(b) {
			t.Fatalf("encoding is not stable: %s, then %s (%v)", b, b2, err)
		}

		// A renewal and a transfer request, as the holder and
		// RequestTransfer write them, read back with their values.
		next := in.Record.clone()
		next.Renewals++
		next.RenewedAt = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
		next.TransferTo = next.Holder + "-next"
		b, err = encode(next)
		if err != nil {
			t.Fatalf("encode a renewal of %q: %v", value, err)
		}
		renewed, err := infoOf(kv.Entry{Key: e.Key, Value: b, Revision: rev + 1})
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

// checkAppendJSON fails t unless r's member-by-member writing, where it
// writes r at all, is byte for byte encoding/json's.
func checkAppendJSON(t *testing.T, r Record) {
	t.Helper()
	if len(r.unknown) > 0 {
		return
	}
	if r.Meta == nil {
		r.Meta = map[string]string{}
	}
	if r.Capabilities == nil {
		r.Capabilities = []string{}
	}
	fast, ok := r.encodeFast()
	if !ok {
		return
	}
	general, err := json.Marshal(recordFields(r))
	if err != nil || string(fast) != string(general) {
		t.Fatalf("written member by member\n%s\nencoding/json (%v)\n%s", fast, err, general)
	}
}

// TestAppendJSON_WritesWhatAcquireWrites: the records acquire and renewal
// write take the member-by-member path, byte for byte encoding/json's.
func TestAppendJSON_WritesWhatAcquireWrites(t *testing.T) {
	now := time.Date(2026, 11, 26, 4, 5, 6, 789, time.UTC)
	for _, r := range []Record{
		{Key: "k", Holder: "h-1", Host: "host", PID: 1234, PIDStart: "boot:1", TTL: Duration(time.Minute), AcquiredAt: now, RenewedAt: now},
		{Key: "k", Holder: "h-1", Host: "host", PID: 1, ChildPID: 2, ChildPIDStart: "boot:2", Fence: 9, TTL: Duration(10 * time.Second),
			AcquiredAt: now, RenewedAt: now.Add(time.Second), Renewals: 3, TransferTo: "h-2", PrevHolder: "h-0", PrevFence: 4, Chosen: true,
			Score: -3, Capabilities: []string{"gpu", "eu"}, Require: []string{"gpu"}, Meta: map[string]string{"b": "2", "a": "1", "c": ""}},
	} {
		if _, ok := r.encodeFast(); !ok {
			t.Errorf("%+v is not written member by member", r)
		}
		checkAppendJSON(t, r)
	}
}

// TestReleaseNote_EncodesAsEncodingJSON: a tombstone's note written member
// by member is encoding/json's, and one it cannot write goes the general way.
func TestReleaseNote_EncodesAsEncodingJSON(t *testing.T) {
	now := time.Date(2026, 11, 26, 4, 5, 6, 789, time.UTC)
	for _, n := range []releaseNote{
		{Key: "k", Holder: "h-1", Fence: 42, Released: now},
		{Key: "k", Holder: "<h\u00e9>", Fence: 1, Released: now},
		{Key: "k", Holder: "h", Released: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		got, gerr := n.encode()
		want, werr := json.Marshal(n)
		if string(got) != string(want) || (gerr == nil) != (werr == nil) {
			t.Errorf("%+v: wrote %s (%v), encoding/json %s (%v)", n, got, gerr, want, werr)
		}
	}
}

// sameRecord compares two records by meaning: times by instant, a nil map
// or slice as an empty one, unknown fields by their JSON values.
func sameRecord(a, b Record) bool {
	norm := func(r Record) Record {
		r.AcquiredAt, r.RenewedAt = r.AcquiredAt.UTC(), r.RenewedAt.UTC()
		if len(r.Meta) == 0 {
			r.Meta = nil
		}
		if len(r.Capabilities) == 0 {
			r.Capabilities = nil
		}
		r.unknown = nil
		return r
	}
	return reflect.DeepEqual(norm(a), norm(b)) && maps.EqualFunc(a.unknown, b.unknown, func(x, y json.RawMessage) bool {
		var vx, vy any
		return json.Unmarshal(x, &vx) == nil && json.Unmarshal(y, &vy) == nil && reflect.DeepEqual(vx, vy)
	})
}

// FuzzValidateNames checks the names Leases and elections take. The input
// is a key and an instance id separated by a NUL byte. A key or instance id
// is accepted exactly when nats.go's jetstream accepts it as a key and it
// follows kv.KeyRule; the election's keys built from accepted names are
// valid keys too. A prefix is accepted exactly when it is 1-64 letters,
// digits, '-' or '_', and the bucket name is then valid. A host id that is
// not blank is accepted when its lease records read back as its own. Every
// refusal is ErrInvalid and states the rule.
func FuzzValidateNames(f *testing.F) {
	for _, seed := range []string{
		"deploy\x00i-1", "chat-bot\x00bot-1", "team.bot\x00b2d3a0f4-7c1e-4a51-9c55-0e7b6a1f9d2e", "a\x00b",
		strings.Repeat("k", kv.MaxKeyLen) + "\x00" + strings.Repeat("i", kv.MaxKeyLen), "baton-2\x00  spaced  ",
		"\x00", ".\x00..", "a.\x00.a", "a/b\x00a b", "a*\x00a>", "é\x00h\u00a0h", "a\x00\x00b",
		strings.Repeat("k", kv.MaxKeyLen+1) + "\x00" + strings.Repeat("p", 65),
	} {
		f.Add(seed)
	}
	// maxStoredKey is kv's limit on the keys its bucket operations take
	// (maxStoredKeyLen), which must hold the election's keys.
	const maxStoredKey = 512
	keyRule := func(s string) bool {
		return kvtest.NATSKeyValid(s) && !strings.Contains(s, "/") && len(s) <= kv.MaxKeyLen
	}
	f.Fuzz(func(t *testing.T, input string) {
		key, instance, _ := strings.Cut(input, "\x00")

		// Keys and instance ids.
		kerr := validKey(key)
		if (kerr == nil) != keyRule(key) {
			t.Fatalf("validKey(%q) = %v; want ok=%v (jetstream and kv.KeyRule)", key, kerr, keyRule(key))
		}
		if kerr != nil && (!errors.Is(kerr, ErrInvalid) || !errors.Is(kerr, kv.ErrInvalidKey) || !strings.Contains(kerr.Error(), kv.KeyRule)) {
			t.Fatalf("validKey(%q) = %v; want ErrInvalid and kv.ErrInvalidKey, quoting the rule", key, kerr)
		}
		var ls Leases
		ierr := WithInstance(instance)(&ls)
		if (ierr == nil) != keyRule(instance) {
			t.Fatalf("WithInstance(%q) = %v; want ok=%v", instance, ierr, keyRule(instance))
		}
		if ierr != nil && (!errors.Is(ierr, ErrInvalid) || !strings.Contains(ierr.Error(), kv.KeyRule)) {
			t.Fatalf("WithInstance(%q) = %v; want ErrInvalid quoting the rule", instance, ierr)
		}
		if kerr == nil {
			if lk := LeaderKey(key); !kvtest.NATSKeyValid(lk) || len(lk) > maxStoredKey {
				t.Fatalf("LeaderKey(%q) = %q: not a key the bucket takes", key, lk)
			}
		}
		if kerr == nil && ierr == nil {
			ck := CandidateKey(key, instance)
			if !kvtest.NATSKeyValid(ck) || len(ck) > maxStoredKey {
				t.Fatalf("CandidateKey(%q, %q) = %q: not a key the bucket takes", key, instance, ck)
			}
			// Every election whose watch of candidate.KEY.> delivers this
			// candidacy (KEY a dot-prefix of key) counts it only if it is
			// its own.
			body := strings.TrimPrefix(ck, "candidate.")
			cand := &Info{Record: Record{Key: ck, Holder: instance}}
			for i := range len(body) {
				other := body[:i]
				if body[i] != '.' || validKey(other) != nil {
					continue
				}
				e := &Election{key: other, leaderKey: LeaderKey(other), candPrefix: CandidateKey(other, "")}
				if !strings.HasPrefix(ck, e.candPrefix) {
					t.Fatalf("%q is not under %q", ck, e.candPrefix)
				}
				if got := len(e.candidatesOf([]*Info{cand})); got != 0 && other != key || got != 1 && other == key {
					t.Fatalf("the election of %q counts %d candidates in the candidacy %q of instance %q in the election of %q", other, got, ck, instance, key)
				}
			}
		}

		// Prefixes.
		perr := WithPrefix(key)(&ls)
		if want := len(key) <= 64 && kvtest.NATSBucketValid(key); (perr == nil) != want {
			t.Fatalf("WithPrefix(%q) = %v; want ok=%v", key, perr, want)
		}
		if perr == nil && (ls.prefix != key || !kvtest.NATSBucketValid(BucketConfig(key, 0).Name)) {
			t.Fatalf("WithPrefix(%q) set %q, bucket %q", key, ls.prefix, BucketConfig(key, 0).Name)
		}
		if perr != nil && (!errors.Is(perr, ErrInvalid) || !strings.Contains(perr.Error(), "1-64 letters, digits, '-' and '_'")) {
			t.Fatalf("WithPrefix(%q) = %v; want ErrInvalid stating the rule", key, perr)
		}

		// Host ids (a blank one means the hostname).
		if strings.TrimSpace(instance) == "" {
			return
		}
		if err := WithHostID(instance)(&ls); err != nil {
			if !errors.Is(err, ErrInvalid) || !errors.Is(err, hostlocal.ErrInvalidName) || !strings.Contains(err.Error(), "host id") {
				t.Fatalf("WithHostID(%q) = %v; want ErrInvalid and hostlocal.ErrInvalidName", instance, err)
			}
			return
		}
		b, err := encode(Record{Key: "deploy", Holder: "i-1", Host: ls.host})
		if err != nil {
			t.Fatal(err)
		}
		in, err := infoOf(kv.Entry{Key: "deploy", Value: b, Revision: 1})
		if err != nil {
			t.Fatalf("a lease of host %q does not decode: %v", ls.host, err)
		}
		if in.Host != ls.host || in.Host != strings.TrimSpace(instance) {
			t.Fatalf("host id %q is written as %s and read back as %q: this host would not know its own lease", ls.host, b, in.Host)
		}
	})
}
