package jsonrec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// fuzzRec has a field of each kind baton's records use. Its names contain
// 's' and 'k', whose case folds include letters outside ASCII (ſ, K).
type fuzzRec struct {
	Slot string            `json:"slot"`
	Key  string            `json:"key"`
	Task string            `json:"task_id"`
	N    int64             `json:"n"`
	OK   bool              `json:"ok,omitempty"`
	Tags []string          `json:"tags"`
	Meta map[string]string `json:"meta"`
}

// FuzzUnmarshal checks Unmarshal against encoding/json: it takes exactly
// the JSON objects encoding/json decodes, fills the known fields as
// encoding/json does, keeps as unknown exactly the keys that match no
// field (not even but for case), and Marshal writes back what it read:
// the known fields as they are now, the unknown ones unchanged.
func FuzzUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`{"slot":"a","key":"k","n":1,"ok":true,"tags":["x","y"],"meta":{"a":"b"}}`,
		`{"slot":"a","future":{"x":[1,2.5,null]},"z":"keep"}`,
		`{"slot":"<&>","later":"\u2028","n":-9223372036854775808}`,
		`  {"SLOT":"a","Key":"k"}` + "\n",
		// A key that is a field's but for case is not unknown, even beside
		// unknown ones; else a rewrite of "slot" would read back the old
		// value of "ſlot" (or of "\u212aey", with a Kelvin sign), which
		// sorts after it.
		`{"KEY":"k","z":1}`, `{"ſlot":"old","z":1}`, "{\"\u212aey\":\"k\",\"z\":[]}",
		`{"tags":null,"meta":null}`,
		// A name with an underscore matches but for case only, never
		// without its underscore or with a dash.
		`{"TASK_ID":"t"}`, `{"task-id":"t"}`, `{"taskid":"t"}`, `{"Task_Id":"t","task_id":"u"}`,
		// Duplicates: the last wins, as in encoding/json.
		`{"slot":"a","slot":"b"}`, "{\"slot\":\"\xff\"}",
		`{}`,
		// Not one object, or not this one.
		``, ` null`, `[]`, `"slot"`, `7`, `{"slot":1}`, `{"n":1e999}`, `{"n":1.5}`,
		`{"slot":"a"}{"slot":"b"}`, `{"slot":"a"} x`, `{"slot":"a","z":1}]`, `{"slot":`,
	} {
		f.Add([]byte(seed))
	}
	fields := map[string]bool{"slot": true, "key": true, "task_id": true, "n": true, "ok": true, "tags": true, "meta": true}
	f.Fuzz(func(t *testing.T, data []byte) {
		// View is encoding/json's Unmarshal, on another decoder.
		var viewed, v1 fuzzRec
		verr, err1 := View(data, &viewed), json.Unmarshal(data, &v1)
		if (verr == nil) != (err1 == nil) || (verr == nil && !reflect.DeepEqual(viewed, v1)) {
			t.Fatalf("View(%q) = %+v, %v; encoding/json: %+v, %v", data, viewed, verr, v1, err1)
		}

		var got fuzzRec
		unknown, err := Unmarshal(data, &got, fields)
		var want fuzzRec
		isObject := json.Unmarshal(data, &want) == nil && firstByte(data) == '{'
		if err != nil {
			if isObject {
				t.Fatalf("Unmarshal(%q) = %v; encoding/json decodes this object", data, err)
			}
			return
		}
		if !isObject {
			t.Fatalf("Unmarshal(%q) took something that is not one JSON object: %+v", data, got)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Unmarshal(%q) known fields = %+v; encoding/json decodes %+v", data, got, want)
		}
		checkUnknown(t, data, unknown, fields)

		// Written back unchanged, it reads the same.
		out, err := Marshal(got, unknown.Clone())
		if err != nil {
			t.Fatalf("Marshal of what Unmarshal(%q) read: %v", data, err)
		}
		var again fuzzRec
		unknown2, err := Unmarshal(out, &again, fields)
		if err != nil {
			t.Fatalf("Unmarshal(Marshal(%q)) = %v; wrote %s", data, err, out)
		}
		if !reflect.DeepEqual(again, got) || !sameUnknown(unknown2, unknown) {
			t.Fatalf("round trip of %q through %s: %+v %v, want %+v %v", data, out, again, unknown2, got, unknown)
		}

		// Rewritten with new values, the new values win and the unknown
		// fields stay.
		changed := got
		changed.Slot, changed.Key, changed.N, changed.OK = got.Slot+"+", got.Key+"+", got.N^1, !got.OK
		changed.Tags = append([]string{"new"}, got.Tags...)
		changed.Meta = map[string]string{"new": "v"}
		out, err = Marshal(changed, unknown.Clone())
		if err != nil {
			t.Fatalf("Marshal of a rewrite of %q: %v", data, err)
		}
		again = fuzzRec{}
		unknown2, err = Unmarshal(out, &again, fields)
		if err != nil {
			t.Fatalf("Unmarshal of a rewrite of %q = %v; wrote %s", data, err, out)
		}
		if !reflect.DeepEqual(again, changed) || !sameUnknown(unknown2, unknown) {
			t.Fatalf("rewrite of %q wrote %s, which reads %+v %v; want %+v %v", data, out, again, unknown2, changed, unknown)
		}
	})
}

// checkUnknown compares unknown with the keys of the object data that
// encoding/json would not decode into a field: none matches a field name
// even when case is folded as encoding/json folds it.
func checkUnknown(t *testing.T, data []byte, unknown Unknown, fields map[string]bool) {
	t.Helper()
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		t.Fatalf("Unmarshal(%q) took it, but it is not an object: %v", data, err)
	}
	for k := range all {
		for name := range fields {
			if strings.EqualFold(k, name) {
				delete(all, k)
			}
		}
	}
	if len(all) == 0 {
		all = nil
	}
	if !sameUnknown(unknown, all) {
		t.Fatalf("Unmarshal(%q) unknown fields = %v, want %v", data, keys(unknown), keys(all))
	}
}

// sameUnknown compares two sets of unknown fields by what their values
// mean (Marshal compacts and escapes them).
func sameUnknown(a, b Unknown) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !reflect.DeepEqual(meaning(va), meaning(vb)) {
			return false
		}
	}
	return true
}

func meaning(raw json.RawMessage) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err.Error()
	}
	return v
}

func keys(u Unknown) []string {
	var ks []string
	for k := range u {
		ks = append(ks, k)
	}
	return ks
}

func firstByte(data []byte) byte {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 {
		return t[0]
	}
	return 0
}
