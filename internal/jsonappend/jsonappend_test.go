package jsonappend

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzWriter: what the Writer writes while OK is byte for byte what
// encoding/json writes for the same values.
func FuzzWriter(f *testing.F) {
	f.Add("a", "b", "c", int64(1), uint64(2), int64(0), int64(0), true)
	f.Add("<", "é", "\x7f", int64(-1), uint64(0), int64(-62135596800), int64(3600), false)
	f.Add("", "\"", "\\", int64(9), uint64(1<<63), int64(253402300800), int64(61), true)
	f.Fuzz(func(t *testing.T, s1, s2, s3 string, i int64, u uint64, sec, off int64, b bool) {
		tm := time.Unix(sec, i%1e9)
		if off != 0 {
			tm = tm.In(time.FixedZone("z", int(off%100000)))
		} else {
			tm = tm.UTC()
		}
		type rec struct {
			A string            `json:"a"`
			I int64             `json:"i"`
			U uint64            `json:"u"`
			B bool              `json:"b"`
			T time.Time         `json:"t"`
			L []string          `json:"l"`
			N []string          `json:"n"`
			M map[string]string `json:"m"`
			E map[string]string `json:"e"`
		}
		r := rec{A: s1, I: i, U: u, B: b, T: tm, L: []string{s2, s3}, M: map[string]string{s1: s2, s3: s1, s2: s3}, E: map[string]string{}}
		w := New(0)
		w.Raw(`{"a":`)
		w.Str(r.A)
		w.Raw(`,"i":`)
		w.Int(r.I)
		w.Raw(`,"u":`)
		w.Uint(r.U)
		w.Raw(`,"b":`)
		w.Bool(r.B)
		w.Raw(`,"t":`)
		w.Time(r.T)
		w.Raw(`,"l":`)
		w.Strings(r.L)
		w.Raw(`,"n":`)
		w.Strings(r.N)
		w.Raw(`,"m":`)
		w.StringMap(r.M)
		w.Raw(`,"e":`)
		w.StringMap(r.E)
		w.Raw(`}`)
		want, err := json.Marshal(r)
		if !w.OK {
			return
		}
		if err != nil {
			t.Fatalf("written %s, but encoding/json fails: %v", w.B, err)
		}
		if string(w.B) != string(want) {
			t.Fatalf("written\n%s\nencoding/json\n%s", w.B, want)
		}
	})
}
