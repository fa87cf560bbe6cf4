package reserve

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/internal/jsonrec/jsonrectest"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/reserve/pattern"
)

// The record a write sends, made of its entries' memoised bytes, and the
// decoder that memoises them read and write every field as encoding/json
// does. (A record of no entries is never written: its key is deleted.
// Its null the generated codec reads and writes.)
func TestMemoCodec(t *testing.T) {
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Record]{
		Encode: func(r *Record) ([]byte, bool) {
			if r.Entries == nil {
				return r.encodeFast()
			}
			b, err := r.encode(nil)
			return b, err == nil
		},
		Decode: func(r *Record, b []byte) bool {
			if bytes.Contains(b, []byte(`"entries":null`)) {
				return r.decodeFast(b, 0)
			}
			got, ok := decodeRecord(b, true)
			for i := range got.Entries {
				got.Entries[i].memo = nil
			}
			*r = got
			return ok
		},
		Known: recordKnown,
	})
}

func memoRecord() Record {
	at := time.Date(2026, 11, 28, 10, 0, 0, 123000000, time.UTC)
	r := Record{Space: "repo", Writer: "w1", WrittenAt: at}
	for i, p := range []string{"src/a/**", "docs/b.md", "internal/c/*.go"} {
		r.Entries = append(r.Entries, Entry{ID: "r" + string(rune('a'+i)), Patterns: []string{p}, Agent: "agent", Host: "h1", PID: 10 + i,
			PIDStart: "boot:1", Fence: uint64(100 + i), TTL: jsonrec.Duration(time.Minute), Since: at, Renewed: at, Meta: map[string]string{"k": "v"}})
	}
	return r
}

// Every test of the package checks each memoised encoding a write uses
// against a fresh one.
func init() { verifyMemos = true }

// Every field of an entry is one that changes while it lasts, and a
// memo's encoding counts only while it has not changed, or one of what
// the reservation is, which never changes: a field added to Entry is
// classed here, and in changing if a write may change it.
func TestMemo_Fields(t *testing.T) {
	changes := []string{"Waiting", "Fence", "Since", "Renewed", "ChildPID", "ChildPIDStart"}
	never := []string{"ID", "Patterns", "Shared", "Agent", "Task", "Host", "PID", "PIDStart", "TTL", "Meta"}
	base := memoRecord().Entries[0]
	typ := reflect.TypeFor[Entry]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		if slices.Contains(never, f.Name) {
			continue
		}
		if !slices.Contains(changes, f.Name) {
			t.Errorf("Entry.%s is neither a field that changes nor one that never does: class it (memo.go)", f.Name)
			continue
		}
		changed := base
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int:
			v.SetInt(v.Int() + 1)
		case reflect.Uint64:
			v.SetUint(v.Uint() + 1)
		case reflect.Struct: // time.Time
			v.Set(reflect.ValueOf(base.Since.Add(time.Millisecond)))
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", f.Name, v.Kind())
		}
		if changingOf(&base) == changingOf(&changed) {
			t.Errorf("an entry with %s changed keeps its memoised encoding", f.Name)
		}
	}
}

// A record read, changed (an entry's fence and times written out, one
// dropped, one added, one renewed) and written again is what encoding/json
// writes of it; its unchanged entries' bytes are those read.
func TestEncode_ReusesUnchangedEntries(t *testing.T) {
	in := memoRecord()
	in.Entries[2].Fence, in.Entries[2].Since, in.Entries[2].Renewed = 0, time.Time{}, time.Time{} // the last write's zeros
	data, err := in.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	r, ok := decodeRecord(data, true)
	if !ok {
		t.Fatalf("decodeRecord refused %s", data)
	}
	for i := range r.Entries {
		if r.Entries[i].memo == nil || !strings.Contains(string(data), r.Entries[i].memo.raw) {
			t.Fatalf("entry %d: memo %+v, not its bytes as read", i, r.Entries[i].memo)
		}
	}
	resolve(&r, 200, time.Date(2026, 11, 28, 10, 0, 1, 0, time.UTC), true)
	next := r
	next.Entries = keep(nil, r.Entries, time.Date(2026, 11, 28, 10, 0, 1, 0, time.UTC), func(e *Entry) bool { return e.ID == "rb" })
	next.Entries[0].Renewed = time.Time{}
	next.Entries = append(next.Entries, Entry{ID: "rz", Patterns: []string{"web/**"}, Host: "h2", PID: 3, TTL: jsonrec.Duration(time.Minute)})
	next.Writer = "w2"
	got, err := next.encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	var plain Record
	if err := json.Unmarshal(got, &plain); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	want, err := plain.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encode wrote\n%s\nencoding/json writes\n%s", got, want)
	}
	for _, s := range []string{`"id":"ra"`, `"id":"rc","patterns":["internal/c/*.go"],"agent":"agent","host":"h1","pid":12,"pid_start":"boot:1","fence":200`, `"id":"rz"`, `"writer":"w2"`} {
		if !strings.Contains(string(got), s) {
			t.Errorf("%s lacks %s", got, s)
		}
	}
	if strings.Contains(string(got), `"id":"rb"`) || strings.Count(string(got), `"renewed"`) != 1 {
		t.Errorf("%s: rb dropped and ra renewed by this write (renewed zero) expected", got)
	}
	// The entries written carry memos of what was written.
	again, err := next.encode(nil)
	if err != nil || !bytes.Equal(again, got) {
		t.Fatalf("written again: %s, %v", again, err)
	}
	for i := range next.Entries {
		if m := next.Entries[i].memo; m == nil || m.at != changingOf(&next.Entries[i]) {
			t.Errorf("entry %s not memoised as written", next.Entries[i].ID)
		}
	}
}

// A record written by a later version keeps what this one does not know
// of its entries when a write of this version rewrites it.
func TestEncode_KeepsUnknownMembersOfEntries(t *testing.T) {
	data := []byte(`{"space":"s","entries":[{"id":"a","patterns":["x"],"host":"h","pid":1,"ttl":"1s","future":{"n":7}},{"id":"b","patterns":["y"],"host":"h","pid":1,"ttl":"1s"}],"writer":"w","written_at":"2026-01-01T00:00:00Z","later":true}`)
	st, err := stateOf("s", kvEntry(data))
	if err != nil {
		t.Fatal(err)
	}
	next := st.kept(time.Time{}, nil)
	next.Entries = next.Entries[1:2:2]
	next.Entries = append(next.Entries, st.rec.Entries[0])
	got, err := next.encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"future":{"n":7}`) || !strings.Contains(string(got), `"later":true`) {
		t.Fatalf("%s lost the members this version does not know", got)
	}
}

// Patterns are parsed once per entry, and again once they change.
func TestCompiledPatterns_Memoised(t *testing.T) {
	e := memoRecord().Entries[0]
	parses := 0
	parse := func(p string) (pattern.Pattern, error) { parses++; return pattern.Parse(p) }
	for range 3 {
		if _, _, err := e.compiledPatterns(parse, true); err != nil {
			t.Fatal(err)
		}
	}
	cp := e
	cp.Fence++ // the bytes change, the patterns do not
	if _, _, err := cp.compiledPatterns(parse, true); err != nil {
		t.Fatal(err)
	}
	cp.Patterns = []string{"docs/**"}
	pats, _, err := cp.compiledPatterns(parse, true)
	if err != nil || parses != 2 || pats[0].String() != "docs/**" {
		t.Fatalf("%d parses, patterns %v (%v): want one, then one for the new patterns", parses, pats, err)
	}
	if _, _, err := (&Entry{ID: "bad", Patterns: []string{"/abs"}}).compiledPatterns(parse, true); err == nil {
		t.Fatal("a bad pattern parsed")
	}
}

// kvEntry is a read of a space's key holding data.
func kvEntry(data []byte) kv.Entry {
	return kv.Entry{Key: "resv.s", Value: data, Revision: 9, Created: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), Op: kv.OpPut}
}

// The tests' check catches an entry whose identity was changed under its
// memo, which would otherwise write its old bytes.
func TestMemo_VerifyCatchesAChangedIdentity(t *testing.T) {
	r := memoRecord()
	if _, err := r.encode(nil); err != nil {
		t.Fatal(err)
	}
	r.Entries[1].TTL = jsonrec.Duration(time.Hour) // what no code may do
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for an entry changed under its memo")
		}
	}()
	_, _ = r.encode(nil)
}
