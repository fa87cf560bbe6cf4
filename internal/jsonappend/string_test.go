package jsonappend

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// String writes what encoding/json writes of a string, byte for byte.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"uote\back`, "<a href='x'>&amp;</a>", "\b\f\n\r\t\x00\x1f\x7f",
		"ünïcödé ✓ 日本", "\u2028\u2029", "bad \xff utf-8 \xc3", "emoji 🎉"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := String([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("String(%q) = %s, want %s", s, got[1:], want)
		}
	})
}

// special finds, wherever it is among the eight, a byte String may not
// copy as it is.
func TestSpecial_IsByteByByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	byByte := func(w []byte) bool {
		for _, c := range w {
			if c < 0x20 || c >= 0x80 || strings.IndexByte(`"\<>&`, c) >= 0 {
				return true
			}
		}
		return false
	}
	w := make([]byte, 8)
	for range 200000 {
		for i := range w {
			w[i] = byte(0x20 + rng.IntN(0x5f))
			if rng.IntN(16) == 0 {
				w[i] = byte(rng.IntN(256))
			}
		}
		if got, want := special(binary.LittleEndian.Uint64(w)), byByte(w); got != want {
			t.Fatalf("special(%q) = %v, want %v", w, got, want)
		}
	}
}
