package hostlocal

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestHostID_OverrideIsTrimmed(t *testing.T) {
	if got, err := HostID("  h1\n"); err != nil || got != "h1" {
		t.Errorf("HostID = %q, %v; want h1", got, err)
	}
}

func TestHostID_RejectsBadOverride(t *testing.T) {
	for _, bad := range []string{"a b", "a\tb", strings.Repeat("h", 254)} {
		if _, err := HostID(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("HostID(%q) = %v, want ErrInvalidName", bad, err)
		}
	}
	if got, err := HostID(strings.Repeat("h", 253)); err != nil || len(got) != 253 {
		t.Errorf("HostID(253 chars) = %q, %v", got, err)
	}
}

func TestHostID_DefaultIsHostname(t *testing.T) {
	want, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	for _, blank := range []string{"", "  "} {
		if got, err := HostID(blank); err != nil || got != want {
			t.Errorf("HostID(%q) = %q, %v; want %q", blank, got, err, want)
		}
	}
}
