package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// files writes an executable and a plain file, with modes and times that
// must not reach the archive.
func files(t *testing.T) (exe, doc string) {
	t.Helper()
	dir := t.TempDir()
	exe, doc = filepath.Join(dir, "prog"), filepath.Join(dir, "README.md")
	if err := os.WriteFile(exe, bytes.Repeat([]byte("\x7fELF program "), 1000), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(doc, []byte("# read me\n"), 0o664); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(doc, time.Now(), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	return exe, doc
}

type got struct {
	name    string
	mode    int64
	mtime   time.Time
	content string
}

func readTarGz(t *testing.T, path string) []got {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if gz.Name != "" || !gz.ModTime.IsZero() {
		t.Errorf("gzip header: name %q, time %v; want none", gz.Name, gz.ModTime)
	}
	tr := tar.NewReader(gz)
	var out []got
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d/%d %q/%q, want 0/0 unnamed", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		b, _ := io.ReadAll(tr)
		out = append(out, got{h.Name, h.Mode, h.ModTime.UTC(), string(b)})
	}
}

func readZip(t *testing.T, path string) []got {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var out []got
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		_ = rc.Close()
		out = append(out, got{f.Name, int64(f.Mode().Perm()), f.Modified.UTC(), string(b)})
	}
	return out
}

func TestRun_SameFilesGiveTheSameBytesWhateverTheirModesAndTimes(t *testing.T) {
	mtime := time.Date(2026, 11, 27, 0, 9, 32, 0, time.UTC)
	for _, ext := range []string{".tar.gz", ".zip"} {
		t.Run(ext, func(t *testing.T) {
			exe, doc := files(t)
			out := t.TempDir()
			a, b := filepath.Join(out, "a"+ext), filepath.Join(out, "b"+ext)
			// The order of the arguments does not matter.
			if err := run(a, "baton_v1_os_arch", mtime.Unix(), []string{exe + "=baton", doc}); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(doc, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := run(b, "baton_v1_os_arch", mtime.Unix(), []string{doc, exe + "=baton"}); err != nil {
				t.Fatal(err)
			}
			ab, _ := os.ReadFile(a)
			bb, _ := os.ReadFile(b)
			if !bytes.Equal(ab, bb) {
				t.Fatal("two archives of the same files differ")
			}
			read := readTarGz
			if ext == ".zip" {
				read = readZip
			}
			exeBytes, _ := os.ReadFile(exe)
			want := []got{
				{"baton_v1_os_arch/", 0o755, mtime, ""},
				{"baton_v1_os_arch/README.md", 0o644, mtime, "# read me\n"},
				{"baton_v1_os_arch/baton", 0o755, mtime, string(exeBytes)},
			}
			entries := read(t, a)
			if len(entries) != len(want) {
				t.Fatalf("%d entries, want %d", len(entries), len(want))
			}
			for i, w := range want {
				g := entries[i]
				if g.name != w.name || g.mode != w.mode || !g.mtime.Equal(w.mtime) || g.content != w.content {
					t.Errorf("entry %d: %q mode %o time %v (%d bytes); want %q mode %o time %v (%d bytes)",
						i, g.name, g.mode, g.mtime, len(g.content), w.name, w.mode, w.mtime, len(w.content))
				}
			}
		})
	}
}

func TestRun_RefusesWhatItCannotWriteTheSameWay(t *testing.T) {
	exe, doc := files(t)
	out := filepath.Join(t.TempDir(), "x.tar.gz")
	for _, tc := range []struct {
		what     string
		out, dir string
		mtime    int64
		args     []string
	}{
		{"no files", out, "d", 0, nil},
		{"no time", out, "d", -1, []string{doc}},
		{"a folder with a slash", out, "a/b", 0, []string{doc}},
		{"another kind of archive", "x.tar.xz", "d", 0, []string{doc}},
		{"a name given twice", out, "d", 0, []string{doc, exe + "=README.md"}},
		{"a path as a name", out, "d", 0, []string{exe + "=../baton"}},
	} {
		if err := run(tc.out, tc.dir, tc.mtime, tc.args); !errors.Is(err, errUsage) {
			t.Errorf("%s: %v, want errUsage", tc.what, err)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an archive was written: %v", err)
	}
}
