//go:build linux || darwin

package hostlocal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plant puts a symbolic link at path to a victim file with content, and
// returns the victim's path.
func plant(t *testing.T, path, content string) string {
	t.Helper()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	return victim
}

func unchanged(t *testing.T, victim, content string) {
	t.Helper()
	if b, err := os.ReadFile(victim); err != nil || string(b) != content {
		t.Errorf("the file a planted link points to was changed: %q, %v", b, err)
	}
}

func wantSymlinkRefusal(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrStateDir) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("%s: %v; want ErrStateDir naming the symbolic link", what, err)
	}
}

// A link planted at a gate's path is never opened through: taking the gate
// is refused and the file it points to is neither truncated nor written.
func TestGate_APlantedSymlinkIsRefusedNotFollowed(t *testing.T) {
	d := openTestDir(t)
	victim := plant(t, filepath.Join(d.Path(), locksDir, "spawn"+lockExt), "precious\n")
	_, err := d.TryLock("spawn", Holder{Purpose: "test"})
	wantSymlinkRefusal(t, "TryLock", err)
	unchanged(t, victim, "precious\n")
	if _, err := d.ClearOrphan("spawn"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("ClearOrphan through a link: %v, want a refusal", err)
	}
	unchanged(t, victim, "precious\n")
}

// A link planted as a directory of the state directory (locks/ pointing
// elsewhere) is refused before a file is created in it.
func TestStateDir_APlantedDirectoryLinkIsRefused(t *testing.T) {
	d := openTestDir(t)
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(d.Path(), locksDir)); err != nil {
		t.Fatal(err)
	}
	_, err := d.TryLock("spawn", Holder{Purpose: "test"})
	wantSymlinkRefusal(t, "TryLock under a linked locks/", err)
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("files created where the link points: %v", entries)
	}
	err = d.WritePIDFile("baton", "slot-a", map[string]int{"pid": 1})
	if err != nil {
		t.Fatalf("a pid file beside (pids/ is not linked): %v", err)
	}
}

// A link planted at a pid file's path is not read through.
func TestPIDFile_APlantedSymlinkIsNotRead(t *testing.T) {
	d := openTestDir(t)
	plant(t, filepath.Join(d.Path(), pidsDir, "baton", "slot-a"+pidExt), `{"pid": 1}`)
	var v map[string]int
	err := d.ReadPIDFile("baton", "slot-a", &v)
	wantSymlinkRefusal(t, "ReadPIDFile", err)
	if v != nil {
		t.Errorf("read %v through the link", v)
	}
}
