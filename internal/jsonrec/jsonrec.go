// Package jsonrec encodes records whose JSON evolves additively: fields a
// reader does not know are kept, and written back when it rewrites the
// record.
package jsonrec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"reflect"
	"strings"
)

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
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(known); err == nil {
		if _, err := dec.Token(); err != io.EOF {
			return nil, errors.New("trailing data after the record")
		}
		return nil, nil
	}
	// Unknown fields, or not a record at all: decode afresh, keeping the
	// unknown fields (json.Unmarshal rejects trailing data itself).
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
