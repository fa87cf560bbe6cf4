//go:build linux || darwin

package hostlocal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A symbolic link or a FIFO planted at a gate's path is listed as unusable,
// with the reason, beside the other gates: it does not fail the list.
func TestLocks_ListsAPlantedPathAsUnusable(t *testing.T) {
	d := openTestDir(t)
	mustLock(t, d, "b-held", Holder{Purpose: "held"})
	locks := filepath.Join(d.Path(), "locks")
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte(`{"pid":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(locks, "a-link.lock")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(locks, "c-fifo.lock"), 0o600); err != nil {
		t.Fatal(err)
	}
	infos, err := d.Locks()
	if err != nil {
		t.Fatalf("Locks with planted paths: %v, want them listed", err)
	}
	if len(infos) != 3 || infos[0].Name != "a-link" || infos[1].Name != "b-held" || infos[2].Name != "c-fifo" {
		t.Fatalf("Locks = %+v, want a-link, b-held, c-fifo", infos)
	}
	for i, want := range map[int]string{0: "symbolic link", 2: "not a regular file"} {
		u := infos[i]
		if u.Unusable == nil || !errors.Is(u.Unusable, ErrStateDir) || !strings.Contains(u.Unusable.Error(), want) || u.Held || u.Holder != nil {
			t.Errorf("%s: %+v, want unusable: %s", u.Name, u, want)
		}
	}
	if i := infos[1]; i.Unusable != nil || !i.Held || i.Holder == nil || i.Holder.Purpose != "held" {
		t.Errorf("held gate beside them: %+v", i)
	}
}
