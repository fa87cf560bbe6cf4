package cmdutil

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// PrintJSON streams a document member by member, and writes exactly what a
// json.Encoder with a two-space indent writes.
func TestPrintJSON_AsTheEncoderWritesIt(t *testing.T) {
	row := json.RawMessage(`{"a":1,"html":"<&>","nested":{"z":[1,{"y":null}],"b":{}}}`)
	plain := json.RawMessage(`{"a":1,"s":"x\u003cy","nested":{"z":[1,{"y":null}],"b":{}},"u":"é"}`)
	spaced := json.RawMessage(` { "a" : [ 1 , 2 ] , "b" : { } } `)
	for _, doc := range []any{
		map[string]any{},
		map[string]any{"sessions": []any{row, plain, spaced, map[string]any{"slot": "s", "n": 2}}, "leases": []map[string]any{},
			"leaders": []map[string]any(nil), "server_time": time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
			"queues": []string{"q1", "q2"}, "bytes": []byte("xy"), "one": []int{7}, "empty": map[string]any{}, "x": nil},
		map[string]any{"only": "one"},
		[]any{row, 1},
		"a string",
	} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := PrintJSON(&got, doc); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("PrintJSON(%v):\n%s\nwant:\n%s", doc, got.String(), want.String())
		}
	}
}

// testRow lays itself out for even n, and leaves odd n to marshalling.
type testRow struct{ n int }

func (r testRow) MarshalJSON() ([]byte, error) {
	return []byte(`{"n":` + strconv.Itoa(r.n) + `,"s":["a<b"]}`), nil
}

func (r testRow) AppendIndentJSON(b []byte, prefix, indent string) ([]byte, bool) {
	b = append(b, "{\n"...)
	b = append(b, prefix+indent+`"n": `...)
	if r.n%2 != 0 {
		return b, false // what it appended so far is dropped
	}
	b = strconv.AppendInt(b, int64(r.n), 10)
	b = append(b, ",\n"+prefix+indent+`"s": [`+"\n"+prefix+indent+indent+`"a\u003cb"`+"\n"+prefix+indent+"]\n"+prefix+"}"...)
	return b, true
}

// Long slices are laid out on several goroutines, and written in order as
// the encoder writes them; a row that fails ends the document there.
func TestPrintJSON_LongSlicesAsTheEncoderWritesThem(t *testing.T) {
	for _, n := range []int{parallelRows - 1, parallelRows, 3*rowChunk*runtime.GOMAXPROCS(0) + 17} {
		rows := make([]any, n)
		for i := range rows {
			switch i % 3 {
			case 0, 1:
				rows[i] = testRow{i}
			default:
				rows[i] = json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)
			}
		}
		doc := map[string]any{"rows": rows, "after": []string{"x"}, "before": 1}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := PrintJSON(&got, doc); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("%d rows: PrintJSON differs from the encoder (%d bytes, want %d)", n, got.Len(), want.Len())
		}
		rows[n-rowChunk-3] = math.Inf(1)
		if err := PrintJSON(io.Discard, doc); err == nil {
			t.Fatalf("%d rows: a row that does not marshal was written", n)
		}
	}
}
