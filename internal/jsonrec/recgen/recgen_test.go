package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every codec_gen.go in the module is what recgen writes from its
// package's structs now: a field added without go generate fails here
// (and in the record's CheckCodec test).
func TestGeneratedCodecsAreUpToDate(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module's root is not %s: %v", root, err)
	}
	var dirs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if bytes.Contains(b, []byte("\n"+directive)) || d.Name() == OutputFile {
				if dir := filepath.Dir(path); len(dirs) == 0 || dirs[len(dirs)-1] != dir {
					dirs = append(dirs, dir)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 4 {
		t.Fatalf("found records in %d packages (%q); want at least session, lease, queue and hostlocal", len(dirs), dirs)
	}
	for _, dir := range dirs {
		want, err := Generate(dir)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		got, err := os.ReadFile(filepath.Join(dir, OutputFile))
		if err != nil || !bytes.Equal(got, want) {
			rel, _ := filepath.Rel(root, dir)
			t.Errorf("%s/%s is not what recgen writes (%v): run go generate ./%s", rel, OutputFile, err, rel)
		}
	}
}

// What recgen cannot write the way encoding/json does, it refuses, saying
// which field and why.
func TestGenerate_RefusesWhatItCannotWrite(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"type R struct {\n\tA []int `json:\"a\"`\n}", "R.A: type []int is not supported"},
		{"type R struct {\n\tA string `json:\"a,string\"`\n}", `R.A: tag option "string" is not supported`},
		{"type R struct {\n\tA string `json:\"a,omitempty\"`\n}", "the first field may not be omitted"},
		{"type R struct {\n\tA string `json:\"a\"`\n\tB string `json:\"a\"`\n}", `two fields named "a"`},
		{"type R struct {\n\tA string `json:\"a\"`\n\tS `json:\"s\"`\n}\ntype S struct{ X int }", "embedded fields are not supported"},
		{"type R struct {\n\tA string `json:\"a\"`\n\tS S `json:\"s\"`\n}\ntype S struct{ X int }", "a struct by value (S) is not supported: use a pointer"},
		{"type R struct {\n\tA string `json:\"a<b\"`\n}", `JSON name "a<b" needs escaping`},
		{"type R struct {\n\tx string\n}", "R has no fields to write"},
		{"type R struct {\n\tA string `json:\"a\"`\n}\n\n//jsonrec:view R\ntype V struct{ B string }", "V.B: R has no such field to read"},
		{"type R struct {\n\tA string `json:\"a\"`\n}\n\n//jsonrec:view R\ntype V struct{ A int }", "V.A is a int; R's is a string"},
		{"type R struct {\n\tA json.RawMessage `json:\"a\"`\n}", "a json.RawMessage is only written"},
	} {
		dir := t.TempDir()
		src := "package p\n\nimport \"encoding/json\"\n\nvar _ json.RawMessage\n\n//jsonrec:codec\n" + tc.src + "\n"
		if err := os.WriteFile(filepath.Join(dir, "r.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Generate(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\nGenerate: %v; want an error saying %q", tc.src, err, tc.want)
		}
	}
}
