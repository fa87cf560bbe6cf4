// Package carry keeps two programs in one file: the client program, which
// the kernel runs, followed by the full program, which the client starts
// for what it does not link (ADR 0030).
//
// A Go process runs the initialisation of every package linked into it
// before main, whatever it is about to do: a `baton join` that linked the
// NATS server, the dashboard's Prometheus client and the MCP SDK paid for
// them at every start. The client program links neither; `baton up`, `ui`,
// `mcp` and --metrics go to the full program, which this package carries
// and starts in the client's place (the same process: exec keeps its pid,
// streams and parent).
//
// The file is the client's bytes, the full program's, then a trailer of
// 64 bytes: the full program's offset and size (little endian, 8 bytes
// each), its SHA-256 and a magic string. The kernel runs the client as it
// would any program; the bytes after it are not mapped.
//
// To start the full program, the client copies it once into the user's
// cache directory (os.UserCacheDir()/baton/<hash>/baton, the directories
// mode 0700), checked against its hash and renamed into place, so that
// every later start is a stat and an exec, and every process of the same
// version shares its pages. Where that directory cannot be written, the
// copy goes into an anonymous memory file (Linux) for that process alone.
// Windows has no exec: there Exec returns ErrUnsupported, and the release
// ships the full program alone (ADR 0036).
//
// What it does not guarantee: the cached copy is trusted as the user's own
// file (as the client itself is); anyone who can write the user's cache
// can change what baton runs, as anyone who can write the client can.
package carry

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ClientEnv names the variable through which the full program, started by
// Exec, learns the path of the client that started it: the program its
// supervisors are (they start fast, and need nothing the client lacks).
const ClientEnv = "BATON_CLIENT_EXE"

// magic ends a file that carries a full program.
const magic = "baton carries v1"

// trailerSize is the trailer's length: offset, size, SHA-256, magic.
const trailerSize = 8 + 8 + sha256.Size + len(magic)

// Payload is where a file keeps the full program it carries.
type Payload struct {
	File   string
	Offset int64
	Size   int64
	Sum    [sha256.Size]byte
}

// Pack writes to out (replacing it atomically, mode 0755) the client
// program followed by the full program and the trailer that finds it.
func Pack(out, client, full string) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".pack-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	fail := func(err error) error { _ = tmp.Close(); return err }
	off, err := appendFile(tmp, client)
	if err != nil {
		return fail(err)
	}
	h := sha256.New()
	size, err := appendFile(io.MultiWriter(tmp, h), full)
	if err != nil {
		return fail(err)
	}
	var tr [trailerSize]byte
	binary.LittleEndian.PutUint64(tr[0:], uint64(off))
	binary.LittleEndian.PutUint64(tr[8:], uint64(size))
	copy(tr[16:], h.Sum(nil))
	copy(tr[16+sha256.Size:], magic)
	if _, err := tmp.Write(tr[:]); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

// appendFile copies the file at path to w, and returns how many bytes it
// copied.
func appendFile(w io.Writer, path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.Copy(w, f)
}

// Find reads the trailer of the file at path: ErrNotCarried if it has
// none.
func Find(path string) (Payload, error) {
	f, err := os.Open(path)
	if err != nil {
		return Payload{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Payload{}, err
	}
	if fi.Size() < int64(trailerSize) {
		return Payload{}, fmt.Errorf("%w: %s", ErrNotCarried, path)
	}
	var tr [trailerSize]byte
	if _, err := f.ReadAt(tr[:], fi.Size()-int64(trailerSize)); err != nil {
		return Payload{}, err
	}
	if string(tr[16+sha256.Size:]) != magic {
		return Payload{}, fmt.Errorf("%w: %s", ErrNotCarried, path)
	}
	p := Payload{File: path, Offset: int64(binary.LittleEndian.Uint64(tr[0:])), Size: int64(binary.LittleEndian.Uint64(tr[8:]))}
	copy(p.Sum[:], tr[16:])
	if p.Offset <= 0 || p.Size <= 0 || p.Offset+p.Size != fi.Size()-int64(trailerSize) {
		return Payload{}, fmt.Errorf("%w: %s: its trailer does not fit the file", ErrCorrupt, path)
	}
	return p, nil
}

// name is the directory of this payload's copy in the cache: its hash.
func (p Payload) name() string { return hex.EncodeToString(p.Sum[:16]) }

// Extract returns the path of an executable copy of the full program in
// dir (dir/<hash>/baton), copying it there first if it is not there yet:
// into a temporary file, checked against the hash, synced and renamed into
// place, so that a copy in place is whole. Copies of other versions in dir
// are removed when a new one is made.
func (p Payload) Extract(dir string) (string, error) {
	vdir := filepath.Join(dir, p.name())
	target := filepath.Join(vdir, "baton")
	if fi, err := os.Stat(target); err == nil && fi.Mode().IsRegular() && fi.Size() == p.Size && fi.Mode().Perm()&0o100 != 0 {
		return target, nil
	}
	if err := os.MkdirAll(vdir, 0o700); err != nil {
		return "", err
	}
	if err := checkPrivate(dir); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(vdir, ".baton-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := p.copyTo(tmp); err != nil {
		_ = tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o700); err != nil {
		_ = tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return "", err
	}
	p.removeOthers(dir)
	return target, nil
}

// copyTo copies the full program to w, checking its hash.
func (p Payload) copyTo(w io.Writer) error {
	f, err := os.Open(p.File)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.NewSectionReader(f, p.Offset, p.Size))
	if err != nil {
		return err
	}
	if n != p.Size || !bytes.Equal(h.Sum(nil), p.Sum[:]) {
		return fmt.Errorf("%w: %s: the full program it carries does not match its hash", ErrCorrupt, p.File)
	}
	return nil
}

// removeOthers removes the copies of other versions from dir, as far as
// it can: a process that runs one keeps it until it ends.
func (p Payload) removeOthers(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != p.name() && isHash(e.Name()) {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

func isHash(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// checkPrivate refuses a cache directory that is not a directory of this
// user's that only this user can write: another's could hold a program of
// theirs under the name of ours.
func checkPrivate(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s: others may write to it (mode %v)", dir, fi.Mode().Perm())
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("%s: owned by uid %d, not this user", dir, uid)
	}
	return nil
}

// CacheDir is where Exec keeps its copies: the user's cache directory's
// baton/ (XDG_CACHE_HOME, else ~/.cache, on Linux).
func CacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "baton"), nil
}

// Exec replaces this process with the full program this program's file
// carries, with argv and env (ClientEnv added, naming this file). It
// returns only an error: ErrNotCarried for a file that carries none,
// ErrCorrupt for one whose program does not match its hash, and
// ErrUnsupported on a system without exec (Windows).
func Exec(argv, env []string) error {
	if err := errNoExec(); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	p, err := Find(self)
	if err != nil {
		return err
	}
	env = append(withoutVar(env, ClientEnv), ClientEnv+"="+self)
	var cacheErr error
	if dir, err := CacheDir(); err != nil {
		cacheErr = err
	} else {
		for try := 0; try < 2; try++ {
			path, err := p.Extract(dir)
			if errors.Is(err, ErrCorrupt) {
				return err // a copy in memory would be as damaged
			}
			if err != nil {
				cacheErr = err
				break
			}
			err = execFile(path, argv, env)
			// A copy removed between the stat and the exec (a newer
			// version's clean-up): copy it again, once.
			if !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("starting the full program %s: %w", path, err)
			}
			cacheErr = fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := execInMemory(p, argv, env); err != nil {
		return fmt.Errorf("starting the full program: the cache failed (%v), and so did memory: %w", cacheErr, err)
	}
	return nil // not reached: execInMemory returns only an error
}

// withoutVar is env without the variable name.
func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
