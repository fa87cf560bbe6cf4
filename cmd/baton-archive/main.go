// Command baton-archive writes one archive of a release (`make release`,
// ADR 0036) so that the same files always give the same bytes: entries
// sorted by name under one folder, every time the one given, owner and
// group 0 with no names, mode 0755 for a file its owner may execute and
// 0644 for any other, and compression with no name or time of its own.
// The archive's kind follows its name: .tar.gz, or .zip (for Windows).
//
//	go run ./cmd/baton-archive -o OUT.tar.gz -dir NAME -mtime UNIXSECONDS FILE[=NAME]...
//
// FILE=NAME stores FILE as NAME in the folder; FILE alone keeps its base
// name.
package main

import (
	"archive/tar"
	"archive/zip"
	"compress/flate"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// errUsage is a command line that names no archive, folder or file.
var errUsage = errors.New("usage: baton-archive -o OUT.tar.gz|OUT.zip -dir NAME -mtime UNIXSECONDS FILE[=NAME] (one or more)")

// entry is one file of the archive: where it is read from, the name it
// gets in the folder, and whether it is executable.
type entry struct {
	src, name string
	exec      bool
}

func main() {
	out := flag.String("o", "", "the archive to write: NAME.tar.gz or NAME.zip")
	dir := flag.String("dir", "", "the folder the files are stored in")
	mtime := flag.Int64("mtime", -1, "every entry's time, in seconds since 1970 (the commit's time)")
	flag.Parse()
	if err := run(*out, *dir, *mtime, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "baton-archive:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(out, dir string, mtime int64, args []string) error {
	if out == "" || dir == "" || mtime < 0 || len(args) == 0 || strings.ContainsAny(dir, `/\`) {
		return errUsage
	}
	entries, err := entriesOf(args)
	if err != nil {
		return err
	}
	t := time.Unix(mtime, 0).UTC()
	switch {
	case strings.HasSuffix(out, ".tar.gz"):
		return writeFile(out, func(w io.Writer) error { return writeTarGz(w, dir, t, entries) })
	case strings.HasSuffix(out, ".zip"):
		return writeFile(out, func(w io.Writer) error { return writeZip(w, dir, t, entries) })
	}
	return fmt.Errorf("%w: %s: the name ends in neither .tar.gz nor .zip", errUsage, out)
}

// entriesOf reads FILE[=NAME] arguments, sorted by name; a name given
// twice is refused.
func entriesOf(args []string) ([]entry, error) {
	var es []entry
	for _, a := range args {
		src, name, ok := strings.Cut(a, "=")
		if !ok {
			name = filepath.Base(src)
		}
		if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
			return nil, fmt.Errorf("%w: %q is not a file name", errUsage, name)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file", src)
		}
		es = append(es, entry{src: src, name: name, exec: fi.Mode().Perm()&0o100 != 0})
	}
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(es); i++ {
		if es[i].name == es[i-1].name {
			return nil, fmt.Errorf("%w: %s named twice", errUsage, es[i].name)
		}
	}
	return es, nil
}

func (e entry) mode() int64 {
	if e.exec {
		return 0o755
	}
	return 0o644
}

// writeFile writes out through write, into a temporary file renamed into
// place once whole.
func writeFile(out string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := write(tmp); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

// writeTarGz writes a gzipped ustar archive: the folder, then its files.
func writeTarGz(w io.Writer, dir string, t time.Time, es []entry) error {
	// A gzip header without a name or time (as gzip -n writes it).
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	hdr := func(name string, mode int64, size int64, typ byte) *tar.Header {
		return &tar.Header{Typeflag: typ, Name: name, Mode: mode, Size: size, ModTime: t, Format: tar.FormatUSTAR}
	}
	if err := tw.WriteHeader(hdr(dir+"/", 0o755, 0, tar.TypeDir)); err != nil {
		return err
	}
	for _, e := range es {
		err := copyEntry(e, func(size int64) (io.Writer, error) {
			return tw, tw.WriteHeader(hdr(path.Join(dir, e.name), e.mode(), size, tar.TypeReg))
		})
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// writeZip writes a zip archive: the folder, then its files, deflated.
func writeZip(w io.Writer, dir string, t time.Time, es []entry) error {
	zw := zip.NewWriter(w)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestCompression)
	})
	fh := &zip.FileHeader{Name: dir + "/", Modified: t}
	fh.SetMode(os.ModeDir | 0o755)
	if _, err := zw.CreateHeader(fh); err != nil {
		return err
	}
	for _, e := range es {
		err := copyEntry(e, func(int64) (io.Writer, error) {
			fh := &zip.FileHeader{Name: path.Join(dir, e.name), Method: zip.Deflate, Modified: t}
			fh.SetMode(os.FileMode(e.mode()))
			return zw.CreateHeader(fh)
		})
		if err != nil {
			return err
		}
	}
	return zw.Close()
}

// copyEntry copies e's file to the writer open returns, given its size.
func copyEntry(e entry, open func(size int64) (io.Writer, error)) error {
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	w, err := open(fi.Size())
	if err != nil {
		return err
	}
	n, err := io.Copy(w, f)
	if err != nil {
		return err
	}
	if n != fi.Size() {
		return fmt.Errorf("%s: changed while it was archived", e.src)
	}
	return nil
}
