package jsonappend

import (
	"encoding/json"
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
