package hostlocal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const (
	// pidsDir is the state directory's folder of pid-file groups.
	pidsDir = "pids"
	// pidExt is the extension of a pid file.
	pidExt = ".pid"
	// maxPIDFileSize bounds what is read of a pid file (a few hundred
	// bytes when baton wrote it).
	maxPIDFileSize = 64 << 10
)

// pidFilePath validates group and name and returns the pid file's path.
func (d *StateDir) pidFilePath(group, name string) (string, error) {
	if err := validName("pid-file group", group); err != nil {
		return "", err
	}
	if err := validName("pid-file", name); err != nil {
		return "", err
	}
	return filepath.Join(d.path, pidsDir, group, name+pidExt), nil
}

// WritePIDFile writes v as JSON to the pid file <state>/pids/<group>/<name>.pid
// (mode 0600, its folders 0700 and made on demand). It writes a temporary
// file in the same folder and renames it over the pid file, so a reader sees
// the old content or the new, never a mix; the file is not fsynced, as its
// pids mean nothing after a reboot anyway. An invalid group or name returns
// an error wrapping ErrInvalidName, and a folder that cannot be made one
// wrapping ErrStateDir.
func (d *StateDir) WritePIDFile(group, name string, v any) error {
	path, err := d.pidFilePath(group, name)
	if err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("hostlocal: pid file %s/%s: %w", group, name, err)
	}
	dir, err := d.subdir(pidsDir, group)
	if err != nil {
		return err
	}
	// The temporary name starts with a dot, so PIDFiles never lists it.
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("hostlocal: pid file %s/%s: %w", group, name, err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("hostlocal: pid file %s/%s: %w", group, name, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("hostlocal: pid file %s/%s: %w", group, name, err)
	}
	return nil
}

// ReadPIDFile decodes the JSON of the pid file <group>/<name> into v. A
// missing file returns an error wrapping fs.ErrNotExist, an invalid group or
// name one wrapping ErrInvalidName.
func (d *StateDir) ReadPIDFile(group, name string, v any) error {
	path, err := d.pidFilePath(group, name)
	if err != nil {
		return err
	}
	f, err := openNoFollow(path)
	if err != nil {
		return fmt.Errorf("hostlocal: pid file %s/%s: %w", group, name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPIDFileSize))
	if err != nil {
		return fmt.Errorf("hostlocal: pid file %s/%s: %w", group, name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("hostlocal: pid file %s: %w", path, err)
	}
	return nil
}

// RemovePIDFile removes the pid file <group>/<name>. It is idempotent: a
// missing file is not an error. An invalid group or name returns an error
// wrapping ErrInvalidName.
func (d *StateDir) RemovePIDFile(group, name string) error {
	path, err := d.pidFilePath(group, name)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hostlocal: pid file %s/%s: %w", group, name, err)
	}
	return nil
}

// PIDFiles returns the names (without .pid) of the pid files of group,
// sorted. A group with no folder yet has none. An invalid group returns an
// error wrapping ErrInvalidName.
func (d *StateDir) PIDFiles(group string) ([]string, error) {
	if err := validName("pid-file group", group); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(d.path, pidsDir, group))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hostlocal: pid files %s: %w", group, err)
	}
	var names []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), pidExt)
		if ok && !e.IsDir() && validName("pid-file", name) == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}
