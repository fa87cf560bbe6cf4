// Package jsonrectest checks a record's fast codec against encoding/json:
// every record type's tests call CheckCodec, so that a field the codec
// does not know fails a test instead of being dropped from every write.
package jsonrectest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// Codec is a record type's fast codec, as recgen writes it.
type Codec[T any] struct {
	// Encode writes a record, or reports false for what only encoding/json
	// may write.
	Encode func(*T) ([]byte, bool)
	// Decode reads a record of the layout Encode writes into a zero T, or
	// reports false (nil: the type has no fast decoder).
	Decode func(*T, []byte) bool
	// Known are the JSON names the record's general decoder keeps as fields
	// (the others it keeps as unknown).
	Known map[string]bool
}

// CheckCodec fails t unless c agrees with encoding/json on T's exported
// fields, read through their json tags: Known names exactly those fields;
// Encode writes, byte for byte, what encoding/json writes of the fields
// (ignoring any MarshalJSON of T itself) for a value with every field
// filled, with none filled, and with each filled alone, so every omitempty
// and omitzero is exercised; Decode reads each of those as encoding/json
// reads it, and does not refuse any. Strings that need escapes must be
// encoded alike too (Decode may refuse them).
func CheckCodec[T any](t testing.TB, c Codec[T]) {
	t.Helper()
	typ := reflect.TypeFor[T]()
	if typ.Kind() != reflect.Struct {
		t.Fatalf("CheckCodec: %s is not a struct", typ)
	}
	twin, names := twinOf(typ)
	if got := slices.Sorted(maps.Keys(c.Known)); !slices.Equal(got, names) {
		t.Errorf("%s: the known fields are %q; its json tags name %q (a codec recgen writes follows the struct: run go generate)", typ, got, names)
	}
	var cases []namedCase
	cases = append(cases, namedCase{"every field set", fill(typ, -1, false, false)})
	cases = append(cases, namedCase{"every field set, the structs it points to empty", fill(typ, -1, false, true)})
	cases = append(cases, namedCase{"no field set", reflect.New(typ).Elem()})
	for i := range typ.NumField() {
		if _, ok := jsonName(typ.Field(i)); ok {
			cases = append(cases, namedCase{"only " + typ.Field(i).Name + " set", fill(typ, i, false, false)})
		}
	}
	for _, tc := range cases {
		checkCase(t, c, typ, twin, tc, true)
	}
	checkCase(t, c, typ, twin, namedCase{"strings that need escapes", fill(typ, -1, true, false)}, false)
}

type namedCase struct {
	name string
	v    reflect.Value
}

func checkCase[T any](t testing.TB, c Codec[T], typ, twin reflect.Type, tc namedCase, mustDecode bool) {
	t.Helper()
	v := tc.v.Addr().Interface().(*T)
	want, err := json.Marshal(toTwin(tc.v, twin).Interface())
	if err != nil {
		t.Fatalf("%s, %s: encoding/json: %v", typ, tc.name, err)
	}
	got, ok := c.Encode(v)
	if !ok {
		t.Errorf("%s, %s: the fast encoder refused\nencoding/json: %s", typ, tc.name, want)
	} else if !bytes.Equal(got, want) {
		t.Errorf("%s, %s: the fast encoder wrote\n%s\nencoding/json writes\n%s", typ, tc.name, got, want)
	}
	if c.Decode == nil {
		return
	}
	general := reflect.New(twin)
	if err := json.Unmarshal(want, general.Interface()); err != nil {
		t.Fatalf("%s, %s: encoding/json reads back: %v", typ, tc.name, err)
	}
	var fast T
	if !c.Decode(&fast, want) {
		if mustDecode {
			t.Errorf("%s, %s: the fast decoder refused what encoding/json writes:\n%s", typ, tc.name, want)
		}
		return
	}
	if g, w := toTwin(reflect.ValueOf(fast), twin).Interface(), general.Elem().Interface(); !reflect.DeepEqual(g, w) {
		t.Errorf("%s, %s: the fast decoder read\n%#v\nencoding/json reads\n%#v", typ, tc.name, g, w)
	}
}

// jsonName is the member name of an exported field, and false for a field
// encoding/json leaves out.
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() || f.Anonymous {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, true
}

// twinOf is a struct type of typ's encoded fields, with their types and
// tags, without typ's methods, and their JSON names, sorted.
func twinOf(typ reflect.Type) (reflect.Type, []string) {
	var fields []reflect.StructField
	var names []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, ok := jsonName(f)
		if !ok {
			continue
		}
		names = append(names, name)
		fields = append(fields, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
	}
	slices.Sort(names)
	return reflect.StructOf(fields), names
}

// toTwin copies v's encoded fields into a value of twin.
func toTwin(v reflect.Value, twin reflect.Type) reflect.Value {
	out := reflect.New(twin).Elem()
	for i := range twin.NumField() {
		out.Field(i).Set(v.FieldByName(twin.Field(i).Name))
	}
	return out
}

// fill is a T with its encoded fields set to values that are not zero,
// every one (only < 0) or only the field only; the structs it points to
// are filled whole, or left zero if emptyParts. With escapes, strings hold
// characters encoding/json escapes.
func fill(typ reflect.Type, only int, escapes, emptyParts bool) reflect.Value {
	v := reflect.New(typ).Elem()
	for i := range typ.NumField() {
		if _, ok := jsonName(typ.Field(i)); !ok || only >= 0 && i != only {
			continue
		}
		setValue(v.Field(i), typ.Field(i).Name, i, escapes, emptyParts)
	}
	return v
}

var (
	jsonRawType = reflect.TypeFor[json.RawMessage]()
	timeType    = reflect.TypeFor[time.Time]()
)

func setValue(f reflect.Value, name string, i int, escapes, emptyParts bool) {
	str := "v-" + strings.ToLower(name)
	if escapes {
		str = "<" + name + "> & \"é\"\n\u2028"
	}
	switch {
	case f.Type() == timeType:
		f.Set(reflect.ValueOf(time.Date(2026, 11, 26, 10, i, 7, 123456789, time.UTC)))
		return
	case f.Type() == jsonRawType:
		f.SetBytes([]byte(fmt.Sprintf(`{"n": %d, "s": "<%s>"}`, i, name)))
		return
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(str)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f.SetInt(int64(i + 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f.SetUint(uint64(1000 + i))
	case reflect.Bool:
		f.SetBool(true)
	case reflect.Slice:
		switch f.Type().Elem().Kind() {
		case reflect.Uint8:
			f.SetBytes([]byte(str + "\x00\xff"))
		case reflect.String:
			f.Set(reflect.ValueOf([]string{str, "b"}).Convert(f.Type()))
		case reflect.Pointer:
			// A list of parts: a full one, and a nil (or empty) one.
			l := reflect.MakeSlice(f.Type(), 2, 2)
			el := f.Type().Elem().Elem()
			p := reflect.New(el)
			if !emptyParts {
				p.Elem().Set(fill(el, -1, escapes, false))
			}
			l.Index(0).Set(p)
			if emptyParts {
				l.Index(1).Set(reflect.New(el))
			}
			f.Set(l)
		case reflect.Struct:
			// A list of parts by value: a full one, and a zero (or only
			// zero) one.
			l := reflect.MakeSlice(f.Type(), 2, 2)
			if !emptyParts {
				l.Index(0).Set(fill(f.Type().Elem(), -1, escapes, false))
			}
			f.Set(l)
		default:
			panic(fmt.Sprintf("jsonrectest: no value for a field of type %s", f.Type()))
		}
	case reflect.Map:
		m := reflect.MakeMap(f.Type())
		m.SetMapIndex(reflect.ValueOf("b").Convert(f.Type().Key()), reflect.ValueOf(str).Convert(f.Type().Elem()))
		m.SetMapIndex(reflect.ValueOf("a").Convert(f.Type().Key()), reflect.ValueOf("x").Convert(f.Type().Elem()))
		f.Set(m)
	case reflect.Pointer:
		p := reflect.New(f.Type().Elem())
		switch {
		case p.Elem().Kind() != reflect.Struct:
			setValue(p.Elem(), name, i, escapes, emptyParts)
		case !emptyParts:
			p.Elem().Set(fill(f.Type().Elem(), -1, escapes, false))
		}
		f.Set(p)
	default:
		panic(fmt.Sprintf("jsonrectest: no value for a field of type %s", f.Type()))
	}
}

// CheckFastDecode fails t if fast decodes data and general does not, or
// decodes it to another value: a fast decoder may refuse anything, but what
// it takes it must read as the general decoder does (for fuzz targets).
func CheckFastDecode[T any](t testing.TB, data []byte, fast func(*T, []byte) bool, general func(*T, []byte) error) {
	t.Helper()
	var got T
	if !fast(&got, data) {
		return
	}
	var want T
	if err := general(&want, data); err != nil {
		t.Fatalf("%q: decoded the fast way, refused the general way: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n fast %#v\n general %#v", data, got, want)
	}
}
