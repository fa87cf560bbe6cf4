package cmdutil

import (
	"bytes"
	"encoding/json"
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
