package hostlocal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestOpenStateDir_Creates0700(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "baton")
	d, err := OpenStateDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if d.Path() != path {
		t.Errorf("Path() = %q, want %q", d.Path(), path)
	}
	if m := mode(t, path); m != 0o700 {
		t.Errorf("state dir mode = %v, want 0700", m)
	}
	l, err := d.TryLock("g", Holder{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if err := d.WritePIDFile("grp", "n", 1); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"locks", "pids", filepath.Join("pids", "grp")} {
		if m := mode(t, filepath.Join(path, sub)); m != 0o700 {
			t.Errorf("%s mode = %v, want 0700", sub, m)
		}
	}
}

func TestOpenStateDir_TightensExisting0755(t *testing.T) {
	path := filepath.Join(t.TempDir(), "baton")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStateDir(path); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o700 {
		t.Errorf("state dir mode = %v, want 0700", m)
	}
}

func TestOpenStateDir_RejectsNonDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStateDir(path); !errors.Is(err, ErrStateDir) {
		t.Errorf("OpenStateDir(file) = %v, want ErrStateDir", err)
	}
	if _, err := OpenStateDir(filepath.Join(path, "sub")); !errors.Is(err, ErrStateDir) {
		t.Errorf("OpenStateDir(file/sub) = %v, want ErrStateDir", err)
	}
	if _, err := OpenStateDir(""); !errors.Is(err, ErrStateDir) {
		t.Errorf("OpenStateDir(\"\") = %v, want ErrStateDir", err)
	}
}

func TestOpenStateDir_RejectsDirectoryOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	path := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 4242, 4242); err != nil {
		t.Skipf("chown: %v", err)
	}
	if _, err := OpenStateDir(path); !errors.Is(err, ErrStateDir) {
		t.Errorf("OpenStateDir(another user's dir) = %v, want ErrStateDir", err)
	}
}

func TestDefaultStateDir_XDGThenHome(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/xdg/state")
	if got, err := DefaultStateDir(); err != nil || got != "/xdg/state/baton" {
		t.Errorf("DefaultStateDir() = %q, %v; want /xdg/state/baton", got, err)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, xdg := range []string{"", "relative/state"} {
		t.Setenv("XDG_STATE_HOME", xdg)
		want := filepath.Join(home, ".local", "state", "baton")
		if got, err := DefaultStateDir(); err != nil || got != want {
			t.Errorf("XDG_STATE_HOME=%q: DefaultStateDir() = %q, %v; want %q", xdg, got, err, want)
		}
	}
}
