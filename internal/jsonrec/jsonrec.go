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
		if fields[k] {
			delete(all, k)
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	return all, nil
}

// Clone copies u.
func (u Unknown) Clone() Unknown { return maps.Clone(u) }
