// Package golden checks records checked in as testdata, as earlier
// versions wrote them, against what this version reads and writes: for
// record tests only.
package golden

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// Check reads every file matching pattern (at least one must) and requires
// that decode reads it as want, and that this version, writing want, still
// writes every field the file has, under the same name. A change may add
// fields; it may not drop, rename or reinterpret one.
func Check[T any](t *testing.T, pattern string, want T, decode func([]byte) (T, error)) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden records match %s: %v", pattern, err)
	}
	now := keys(t, mustMarshal(t, want))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decode(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s decodes to\n%+v\nwant\n%+v", f, got, want)
		}
		for _, k := range slices.Sorted(maps.Keys(keys(t, b))) {
			if !now[k] {
				t.Errorf("%s has %q, which this version no longer writes", f, k)
			}
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keys are the top-level names of a JSON object.
func keys(t *testing.T, b []byte) map[string]bool {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}
