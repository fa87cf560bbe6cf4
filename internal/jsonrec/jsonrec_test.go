package jsonrec

import (
	"encoding/json"
	"testing"
)

type rec struct {
	A string `json:"a"`
	B int    `json:"b"`
}

var recFields = map[string]bool{"a": true, "b": true}

func TestUnmarshalTakesExactlyOneObject(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"a":"x","b":1}`, true},
		{"  {\"a\":\"x\"}\n", true},
		{`{"a":"x"}{"a":"y"}`, false},
		{`{"a":"x"}}`, false},
		{`{"a":"x"}]`, false},
		{`{"a":"x"} 7`, false},
		{`{"a":`, false},
		{``, false},
		{`[1]`, false},
		{`{"a":1}`, false},
		// The same with a field the type does not know (the second path).
		{`{"a":"x","z":1}`, true},
		{`{"a":"x","z":1}{"a":"y"}`, false},
		{`{"a":"x","z":1}}`, false},
		{`{"a":1,"z":1}`, false},
	} {
		var r rec
		_, err := Unmarshal([]byte(tc.in), &r, recFields)
		if (err == nil) != tc.ok {
			t.Errorf("Unmarshal(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

func TestUnknownFieldsSurviveRoundTrip(t *testing.T) {
	in := []byte(`{"a":"x","b":2,"future":{"n":[1,2]},"z":"keep"}`)
	var r rec
	unk, err := Unmarshal(in, &r, recFields)
	if err != nil {
		t.Fatal(err)
	}
	if r.A != "x" || r.B != 2 {
		t.Fatalf("known fields = %+v", r)
	}
	if len(unk) != 2 || string(unk["z"]) != `"keep"` {
		t.Fatalf("unknown = %v", unk)
	}
	r.B = 3
	out, err := Marshal(r, unk.Clone())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got["b"] != float64(3) || got["z"] != "keep" || got["future"] == nil {
		t.Fatalf("round trip = %s", out)
	}
}

func TestKnownFieldWinsOverUnknownOfSameName(t *testing.T) {
	out, err := Marshal(rec{A: "new"}, Unknown{"a": json.RawMessage(`"old"`)})
	if err != nil {
		t.Fatal(err)
	}
	var r rec
	if err := json.Unmarshal(out, &r); err != nil || r.A != "new" {
		t.Fatalf("Marshal = %s, %v", out, err)
	}
}

func TestUnknownFieldsDoNotLeakFromTheFirstAttempt(t *testing.T) {
	// The first pass stops at the unknown field; what it decoded before
	// must not survive into the result of the second.
	r := rec{A: "stale", B: 9}
	unk, err := Unmarshal([]byte(`{"b":1,"z":true}`), &r, recFields)
	if err != nil || r.A != "" || r.B != 1 || string(unk["z"]) != "true" {
		t.Fatalf("Unmarshal = %+v, %v, %v", r, unk, err)
	}
}

func TestAKeyDifferingOnlyInCaseFillsTheField(t *testing.T) {
	var r rec
	unk, err := Unmarshal([]byte(`{"A":"x"}`), &r, recFields)
	if err != nil || r.A != "x" || unk != nil {
		t.Fatalf("Unmarshal = %+v, %v, %v; want A filled and nothing unknown", r, unk, err)
	}
}

func TestUnmarshalStartsFromZeroAndRefusesANonPointer(t *testing.T) {
	r := rec{A: "stale", B: 9}
	if _, err := Unmarshal([]byte(`{"b":1}`), &r, recFields); err != nil || r != (rec{B: 1}) {
		t.Fatalf("Unmarshal into a used value = %+v, %v", r, err)
	}
	if _, err := Unmarshal([]byte(`{"b":1}`), rec{}, recFields); err == nil {
		t.Fatal("Unmarshal into a non-pointer: no error")
	}
	if _, err := Unmarshal([]byte(`{"b":1}`), (*rec)(nil), recFields); err == nil {
		t.Fatal("Unmarshal into a nil pointer: no error")
	}
}

func TestNoUnknownFieldsIsNil(t *testing.T) {
	var r rec
	unk, err := Unmarshal([]byte(`{"a":"x"}`), &r, recFields)
	if err != nil || unk != nil {
		t.Fatalf("Unmarshal = %v, %v; want nil, nil", unk, err)
	}
}

// A view without bytes skips a []byte field's value, whatever it is, and
// reads the rest as View does.
func TestViewWithoutBytes(t *testing.T) {
	type rec struct {
		Name    string `json:"name"`
		Payload []byte `json:"payload"`
		N       int    `json:"n"`
	}
	for _, in := range []string{
		`{"name":"a","payload":"aGVsbG8=","n":3}`,
		`{"name":"a","payload":"not base64!","n":3}`,
		`{"name":"a","payload":{"x":[1,2]},"n":3}`,
	} {
		var got rec
		if err := ViewWithoutBytes([]byte(in), &got); err != nil || got.Name != "a" || got.N != 3 || got.Payload != nil {
			t.Errorf("ViewWithoutBytes(%s) = %+v, %v", in, got, err)
		}
	}
	var got rec
	if err := ViewWithoutBytes([]byte(`{"name":"a","payload":"x","n":"three"}`), &got); err == nil {
		t.Errorf("a field of the wrong type was taken: %+v", got)
	}
}
