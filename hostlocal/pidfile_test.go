package hostlocal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

type pidRecord struct {
	PID  int    `json:"pid"`
	Slot string `json:"slot"`
	Pad  string `json:"pad,omitempty"`
}

func TestPIDFile_RoundTripWithMode0600(t *testing.T) {
	d := openTestDir(t)
	want := pidRecord{PID: 4242, Slot: "rendering"}
	if err := d.WritePIDFile("sessions", "rendering", want); err != nil {
		t.Fatal(err)
	}
	var got pidRecord
	if err := d.ReadPIDFile("sessions", "rendering", &got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("read %+v, want %+v", got, want)
	}
	path := filepath.Join(d.Path(), "pids", "sessions", "rendering.pid")
	if m := mode(t, path); m != 0o600 {
		t.Errorf("pid file mode = %v, want 0600", m)
	}
}

func TestPIDFile_ReadMissingIsNotExist(t *testing.T) {
	d := openTestDir(t)
	var v pidRecord
	if err := d.ReadPIDFile("sessions", "nope", &v); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadPIDFile(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestPIDFile_ReplaceIsAtomicForReaders(t *testing.T) {
	d := openTestDir(t)
	small := pidRecord{PID: 1, Slot: "small"}
	big := pidRecord{PID: 2, Slot: "big", Pad: strings.Repeat("x", 16<<10)}
	if err := d.WritePIDFile("g", "n", small); err != nil {
		t.Fatal(err)
	}
	const rounds = 60
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var got pidRecord
			if err := d.ReadPIDFile("g", "n", &got); err != nil {
				t.Errorf("a reader saw a partial pid file: %v", err)
				return
			}
			if got.Slot != "small" && got.Slot != "big" {
				t.Errorf("a reader saw %+v", got)
				return
			}
		}
	})
	for i := range rounds {
		v := small
		if i%2 == 0 {
			v = big
		}
		if err := d.WritePIDFile("g", "n", v); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	entries, err := os.ReadDir(filepath.Join(d.Path(), "pids", "g"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "n.pid" {
		t.Errorf("pid folder holds %v, want only n.pid (no temporary files)", entries)
	}
	var got pidRecord
	if err := d.ReadPIDFile("g", "n", &got); err != nil || got != small {
		t.Errorf("last value = %+v, %v; want %+v", got, err, small)
	}
}

func TestPIDFile_RemoveIsIdempotent(t *testing.T) {
	d := openTestDir(t)
	if err := d.RemovePIDFile("g", "never"); err != nil {
		t.Errorf("RemovePIDFile of a file never written = %v", err)
	}
	if err := d.WritePIDFile("g", "n", 1); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := d.RemovePIDFile("g", "n"); err != nil {
			t.Errorf("RemovePIDFile = %v", err)
		}
	}
	var v int
	if err := d.ReadPIDFile("g", "n", &v); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadPIDFile after remove = %v, want fs.ErrNotExist", err)
	}
}

func TestPIDFiles_ListsSortedNames(t *testing.T) {
	d := openTestDir(t)
	if names, err := d.PIDFiles("g"); err != nil || len(names) != 0 {
		t.Fatalf("PIDFiles of a missing group = %v, %v; want none", names, err)
	}
	for _, n := range []string{"b", "a.b", "a-b", "a"} {
		if err := d.WritePIDFile("g", n, 1); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(d.Path(), "pids", "g")
	for _, junk := range []string{".a.tmp-1", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, junk), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	names, err := d.PIDFiles("g")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "a-b", "a.b", "b"}; !reflect.DeepEqual(names, want) {
		t.Errorf("PIDFiles = %q, want %q", names, want)
	}
}
