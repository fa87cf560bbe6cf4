package hostlocal

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// dirPerm is the mode of the state directory and every directory in it.
const dirPerm = 0o700

// DefaultStateDir returns the default state directory:
// $XDG_STATE_HOME/baton when XDG_STATE_HOME is set to an absolute path,
// else ~/.local/state/baton. It does not create it (OpenStateDir does). When
// the home directory is unknown it returns an error wrapping ErrStateDir.
func DefaultStateDir() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "baton"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("%w: %w; set --state-dir or BATON_STATE_DIR", ErrStateDir, err)
	}
	return filepath.Join(home, ".local", "state", "baton"), nil
}

// StateDir is baton's private per-user directory on this host. It holds the
// gates (locks/) and the pid files (pids/). A StateDir is safe for
// concurrent use.
type StateDir struct {
	path string

	mu   sync.Mutex
	made map[string]bool // subdirectories known to exist
}

// OpenStateDir creates the state directory at path with mode 0700 if it
// does not exist, and tightens an existing one of this user to 0700 if
// group or others have any permission on it. It returns an error wrapping
// ErrStateDir when the directory cannot be created or changed, is not a
// directory, or is owned by another user. A relative path is made absolute.
func OpenStateDir(path string) (*StateDir, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: empty path; set --state-dir or BATON_STATE_DIR", ErrStateDir)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateDir, err)
	}
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateDir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateDir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory; remove it or choose another state dir", ErrStateDir, abs)
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Geteuid() {
		return nil, fmt.Errorf("%w: %s is owned by uid %d, not by uid %d; use a state dir of your own (--state-dir or BATON_STATE_DIR)",
			ErrStateDir, abs, uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(abs, dirPerm); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStateDir, err)
		}
	}
	return &StateDir{path: abs}, nil
}

// Path returns the state directory's absolute path.
func (d *StateDir) Path() string { return d.path }

// subdir returns the directory made of the state directory and elem,
// creating it (and any parent) with mode 0700 when it is missing. A failure
// wraps ErrStateDir.
func (d *StateDir) subdir(elem ...string) (string, error) {
	dir := filepath.Join(append([]string{d.path}, elem...)...)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.made[dir] {
		return dir, nil
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return "", fmt.Errorf("%w: %w", ErrStateDir, err)
	}
	if err := d.checkNoLinks(dir); err != nil {
		return "", err
	}
	if d.made == nil {
		d.made = map[string]bool{}
	}
	d.made[dir] = true
	return dir, nil
}

// symlinkError is the refusal of a symbolic link baton did not make, met
// where it opens or creates a file of its state directory.
func symlinkError(path string) error {
	return fmt.Errorf("%w: %s is a symbolic link, and baton never follows a link in its state directory that it did not make; remove it", ErrStateDir, path)
}

// checkNoLinks refuses dir if it, or a directory between the state
// directory and it, is a symbolic link or not a directory: a link planted
// there would make baton create its files elsewhere.
func (d *StateDir) checkNoLinks(dir string) error {
	rel, err := filepath.Rel(d.path, dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStateDir, err)
	}
	at := d.path
	for _, elem := range strings.Split(rel, string(filepath.Separator)) {
		if elem == "." {
			continue
		}
		at = filepath.Join(at, elem)
		fi, err := os.Lstat(at)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrStateDir, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return symlinkError(at)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%w: %s is not a directory; remove it", ErrStateDir, at)
		}
	}
	return nil
}

// forget drops what subdir knows of dir, after it turned out to be gone.
func (d *StateDir) forget(dir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.made, dir)
}
