package hostlocal

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzNames checks the names of gates and pid files, and host ids. A name
// is accepted exactly when it is 1-200 characters of A-Z a-z 0-9 - _ = .
// not starting with a dot, and then names a file right inside its folder;
// a refusal wraps ErrInvalidName and states the rule. A host id override is
// accepted when it is not blank, has no space inside, is at most 253 bytes
// and is valid UTF-8, and is then the override without its surrounding
// space.
func FuzzNames(f *testing.F) {
	for _, seed := range []string{
		"slot-rendering", "a", "A-Z_a-z=0.9", "slot-a..b", "x.", strings.Repeat("n", maxNameLen), "build-7.example.com",
		"", ".", "..", ".hidden", "a/b", "../x", "a b", "a\x00", "é", strings.Repeat("n", maxNameLen+1),
		"  h1\n", "h\u00a0h", "\u2028", "h\xffh", strings.Repeat("h", maxHostIDLen), strings.Repeat("h", maxHostIDLen+1),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := validName("gate", name)
		want := len(name) >= 1 && len(name) <= maxNameLen && name[0] != '.' &&
			strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=.") == ""
		if (err == nil) != want {
			t.Fatalf("validName(%q) = %v; want ok=%v", name, err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), "use 1-200 characters of A-Z a-z 0-9 - _ = . not starting with a dot") {
				t.Fatalf("validName(%q) = %v; want ErrInvalidName stating the rule", name, err)
			}
		}
		d := &StateDir{path: "/state"}
		p, perr := d.pidFilePath(name, name)
		if (perr == nil) != want || perr != nil && !errors.Is(perr, ErrInvalidName) {
			t.Fatalf("pid file %q in group %q: %q, %v; want ok=%v", name, name, p, perr, want)
		}
		if dir := filepath.Join("/state", pidsDir, name); perr == nil && (filepath.Dir(p) != dir || filepath.Base(p) != name+pidExt) {
			t.Fatalf("pid file %q of group %q is %s, not a file right inside %s", name, name, p, dir)
		}

		if strings.TrimSpace(name) == "" {
			return // the hostname
		}
		id, err := HostID(name)
		trimmed := strings.TrimSpace(name)
		want = len(trimmed) <= maxHostIDLen && strings.IndexFunc(trimmed, unicode.IsSpace) < 0 && utf8.ValidString(trimmed)
		if (err == nil) != want {
			t.Fatalf("HostID(%q) = %q, %v; want ok=%v", name, id, err, want)
		}
		if err != nil && (!errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), "host id")) {
			t.Fatalf("HostID(%q) = %v; want ErrInvalidName about the host id", name, err)
		}
		if err == nil && id != trimmed {
			t.Fatalf("HostID(%q) = %q, want %q", name, id, trimmed)
		}
	})
}
