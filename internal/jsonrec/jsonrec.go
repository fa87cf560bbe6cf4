// Package jsonrec encodes records whose JSON evolves additively: fields a
// reader does not know are kept, and written back when it rewrites the
// record.
//
// scan.go passes 500 lines and stays one file: the Scanner is one
// primitive, a reader for each kind of value a record's layout holds, each
// beside the Skip that drops it.
package jsonrec

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// strict is encoding/json's behaviour on json v2's decoder, less unknown
// fields.
var strict = jsonv2.JoinOptions(v1, jsonv2.RejectUnknownMembers(true))

// v1 is encoding/json's behaviour on json v2's decoder.
var v1 = jsonv1.DefaultOptionsV1()

// View decodes data into v as encoding/json's Unmarshal does (fields v does
// not have are skipped), on json v2's faster decoder: for readers that show
// a record and never write it back.
func View(data []byte, v any) error { return jsonv2.Unmarshal(data, v, v1) }

// ViewWithoutBytes is View, but it skips the value of every []byte field,
// whatever it holds (they stay nil): for readers that show a record
// without its payload.
func ViewWithoutBytes(data []byte, v any) error { return jsonv2.Unmarshal(data, v, withoutBytes) }

var withoutBytes = jsonv2.JoinOptions(v1, jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(
	func(d *jsontext.Decoder, _ *[]byte) error { return d.SkipValue() })))

// Unknown holds the fields of a JSON object that a type does not know.
type Unknown map[string]json.RawMessage

// Marshal encodes known (a struct) and adds the unknown fields to it.
func Marshal(known any, unknown Unknown) ([]byte, error) {
	b, err := json.Marshal(known)
	if err != nil || len(unknown) == 0 {
		return b, err
	}
	all := make(map[string]json.RawMessage, len(unknown)+16)
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, v := range unknown {
		if _, ok := all[k]; !ok {
			all[k] = v
		}
	}
	return json.Marshal(all)
}

// Unmarshal decodes data, which must hold exactly one JSON object, into
// known (a pointer to a struct, zeroed first) and returns the fields whose
// names are not in fields. A record with no unknown fields, the common
// case, is scanned once; one with unknown fields is decoded again to keep
// them. As in encoding/json, a key that matches a field but for case
// (say "Slot" for "slot") fills that field; it is not kept as unknown.
func Unmarshal(data []byte, known any, fields map[string]bool) (Unknown, error) {
	v := reflect.ValueOf(known)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil, &json.InvalidUnmarshalError{Type: reflect.TypeOf(known)}
	}
	v.Elem().SetZero()
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		// encoding/json would take null, leaving a zero record.
		return nil, errors.New("the record is not a JSON object")
	}
	// The common case, one pass: json v2's decoder with encoding/json's
	// semantics (names matched but for case, duplicates and invalid UTF-8
	// taken), refusing unknown fields and trailing data. It decodes a
	// record several times faster than encoding/json, allocating a quarter
	// as much, which is most of what listing 100k sessions costs.
	if err := jsonv2.Unmarshal(data, known, strict); err == nil {
		return nil, nil
	}
	// Unknown fields, or not a record at all: decode afresh with
	// encoding/json, keeping the unknown fields (json.Unmarshal rejects
	// trailing data itself).
	v.Elem().SetZero()
	if err := json.Unmarshal(data, known); err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	for k := range all {
		if isField(k, fields) {
			delete(all, k)
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	return all, nil
}

// isField reports whether encoding/json decodes the key k into one of fields:
// it matches a name exactly or but for case, folded as encoding/json folds
// it (so "ſlot" matches "slot"). Such a key must not be kept as unknown: a
// rewrite would write it back beside the field, and the stale value, if it
// sorts last, would win when the record is read again.
func isField(k string, fields map[string]bool) bool {
	if fields[k] {
		return true
	}
	for name := range fields {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// Clone copies u.
func (u Unknown) Clone() Unknown { return maps.Clone(u) }

// Known is the JSON names of the exported fields of struct type T, as its
// json tags give them: the fields argument of Unmarshal for a record whose
// codec recgen does not write (one holding a slice of structs).
func Known[T any]() map[string]bool {
	t := reflect.TypeFor[T]()
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = true
	}
	return out
}
