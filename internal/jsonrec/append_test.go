package jsonrec

import (
	"encoding/json"
	"testing"
	"time"
)

// AppendString writes what encoding/json writes, byte for byte.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"uote\back`, "<a href='x'>&amp;</a>", "\b\f\n\r\t\x00\x1f\x7f",
		"ünïcödé ✓ 日本", "\u2028\u2029", "bad \xff utf-8 \xc3", "emoji 🎉"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got[1:], want)
		}
	})
}

func TestAppendTime_AsEncodingJSON(t *testing.T) {
	for _, tm := range []time.Time{time.Time{}, time.Date(2026, 11, 26, 5, 4, 3, 123456789, time.UTC), time.Date(1999, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))} {
		want, _ := json.Marshal(tm)
		got, err := AppendTime(nil, tm)
		if err != nil || string(got) != string(want) {
			t.Errorf("AppendTime(%v) = %s, %v; want %s", tm, got, err, want)
		}
	}
	if _, err := AppendTime(nil, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("a year past 9999: no error")
	}
}
