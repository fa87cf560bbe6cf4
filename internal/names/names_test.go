package names

import (
	"strings"
	"testing"
)

func TestPlain(t *testing.T) {
	for _, tc := range []struct {
		s    string
		max  int
		want bool
	}{
		{"baton", 64, true},
		{"a-b_C9", 64, true},
		{"", 64, false},
		{"", 0, false},
		{strings.Repeat("a", 64), 64, true},
		{strings.Repeat("a", 65), 64, false},
		{strings.Repeat("a", 65), 0, true},
		{"a.b", 0, false},
		{"a b", 0, false},
		{"a*", 0, false},
		{"é", 0, false},
		{"a/b", 0, false},
	} {
		if got := Plain(tc.s, tc.max); got != tc.want {
			t.Errorf("Plain(%q, %d) = %v, want %v", tc.s, tc.max, got, tc.want)
		}
	}
}
