package reserve

import (
	"testing"

	"github.com/batonhq/baton/internal/jsonrec/jsonrectest"
)

// The codecs written from the records' fields write and read every one of
// them as encoding/json does.
func TestCodecs(t *testing.T) {
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Record]{
		Encode: (*Record).encodeFast,
		Decode: func(r *Record, b []byte) bool { return r.decodeFast(b, 0) },
		Known:  recordKnown,
	})
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Entry]{
		Encode: (*Entry).encodeFast,
		Decode: func(e *Entry, b []byte) bool { return e.decodeFast(b, 0) },
		Known:  entryKnown,
	})
}

// A row of Status reads back as it was written, its own fields apart from
// its entry's.
func TestRow_JSONRoundTrip(t *testing.T) {
	in := Row{Entry: Entry{ID: "r1", Patterns: []string{"src/**"}, Host: "h", PID: 7, Fence: 9}, State: "held", AgeMS: 12, TTLLeftMS: 3400}
	b, err := in.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var out Row
	if err := out.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	again, _ := out.MarshalJSON()
	if string(again) != string(b) || out.State != "held" || out.AgeMS != 12 || out.TTLLeftMS != 3400 || out.Fence != 9 {
		t.Fatalf("round trip: %s -> %+v -> %s", b, out, again)
	}
}
