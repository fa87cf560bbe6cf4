package carry

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// pack writes a client and a full "program" of the given bytes and packs
// them, returning the packed file's path.
func pack(t *testing.T, client, full []byte) string {
	t.Helper()
	dir := t.TempDir()
	c, f, out := filepath.Join(dir, "client"), filepath.Join(dir, "full"), filepath.Join(dir, "baton")
	if err := os.WriteFile(c, client, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Pack(out, c, f); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPack_TheFileIsTheClientAndFindFindsTheFullProgram(t *testing.T) {
	client, full := bytes.Repeat([]byte("c"), 1000), bytes.Repeat([]byte("F"), 3000)
	out := pack(t, client, full)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, client) {
		t.Error("the packed file does not start with the client program")
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", fi.Mode().Perm())
	}
	p, err := Find(out)
	if err != nil {
		t.Fatal(err)
	}
	if p.Offset != int64(len(client)) || p.Size != int64(len(full)) || !bytes.Equal(b[p.Offset:p.Offset+p.Size], full) {
		t.Errorf("Find: offset %d size %d, want %d and %d", p.Offset, p.Size, len(client), len(full))
	}
}

func TestFind_AFileThatCarriesNothingOrIsDamaged(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, bytes.Repeat([]byte("x"), 500), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(plain); !errors.Is(err, ErrNotCarried) {
		t.Errorf("a plain file: %v, want ErrNotCarried", err)
	}
	tiny := filepath.Join(dir, "tiny")
	if err := os.WriteFile(tiny, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(tiny); !errors.Is(err, ErrNotCarried) {
		t.Errorf("a file shorter than a trailer: %v, want ErrNotCarried", err)
	}
	// Bytes lost before the trailer (a damaged copy): the trailer's
	// numbers no longer fit.
	out := pack(t, []byte("client"), []byte("full program"))
	b, _ := os.ReadFile(out)
	cut := append(append([]byte{}, b[:3]...), b[4:]...)
	if err := os.WriteFile(out, cut, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(out); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a file missing a byte: %v, want ErrCorrupt", err)
	}
}

func TestExtract_CopiesOnceIntoAPrivateDirectoryAndIsThenShared(t *testing.T) {
	full := bytes.Repeat([]byte("full"), 10000)
	p, err := Find(pack(t, []byte("client"), full))
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	path, err := p.Extract(cache)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, full) {
		t.Error("the copy is not the full program")
	}
	for _, d := range []string{cache, filepath.Dir(path)} {
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o700 {
		t.Errorf("the copy's mode %v, want 0700", fi.Mode().Perm())
	}
	before, _ := os.Stat(path)
	again, err := p.Extract(cache)
	if err != nil || again != path {
		t.Fatalf("second Extract: %q, %v; want %q", again, err, path)
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) {
		t.Error("the second Extract copied again")
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d entries beside the copy, want only it (no temporary file left)", len(entries))
	}
}

func TestExtract_ANewVersionRemovesTheOldOnesCopies(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	old, _ := Find(pack(t, []byte("client"), []byte("version 1")))
	oldPath, err := old.Extract(cache)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(cache, "not-a-copy")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	cur, _ := Find(pack(t, []byte("client"), []byte("version 2")))
	if _, err := cur.Extract(cache); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(oldPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old version's copy: %v, want removed", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a directory that is not a copy was removed: %v", err)
	}
}

func TestExtract_ADamagedProgramIsNotPutInPlace(t *testing.T) {
	out := pack(t, []byte("client"), []byte("the full program"))
	b, _ := os.ReadFile(out)
	b[len("client")+2] ^= 0xff
	if err := os.WriteFile(out, b, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := Find(out)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	if _, err := p.Extract(cache); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Extract of a damaged program: %v, want ErrCorrupt", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(cache, p.name())); len(entries) != 0 {
		t.Errorf("%d files left in the cache, want none", len(entries))
	}
}

func TestExtract_RefusesACacheOthersCanWrite(t *testing.T) {
	p, _ := Find(pack(t, []byte("client"), []byte("full")))
	cache := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cache, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	if _, err := p.Extract(cache); err == nil {
		t.Error("Extract into a directory anyone may write: no error")
	}
}

func TestWithoutVar(t *testing.T) {
	env := []string{"A=1", ClientEnv + "=/old", "B=2", ClientEnv + "X=keep"}
	got := withoutVar(env, ClientEnv)
	want := []string{"A=1", "B=2", ClientEnv + "X=keep"}
	if len(got) != len(want) {
		t.Fatalf("%q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%q, want %q", got, want)
		}
	}
	if env[1] != ClientEnv+"=/old" {
		t.Error("withoutVar changed its input")
	}
}
