// Command recgen writes the fast JSON codec of a package's records from
// their struct definitions, so that a record's layout is written once: in
// its struct and its json tags.
//
// A type whose declaration carries the line
//
//	//jsonrec:codec
//
// gets, in codec_gen.go beside it, an encoder that writes the record byte
// for byte as encoding/json writes its fields (appendJSON, encodeFast), a
// decoder that reads that layout (scanJSON, decodeFast) and refuses
// anything else, the set of its JSON names (<type>Known) and a bit per
// field (<type>Field<Name>) for decoders that skip some. "//jsonrec:codec
// encode" writes the encoder alone. Struct types the record points to are
// given the same, as parts of it.
//
// Run it with go generate in the package (each such package has a
// //go:generate line); a test of this command fails while any generated
// file differs from what it would write.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	dir := flag.String("dir", ".", "the package's directory")
	flag.Parse()
	out, err := Generate(*dir)
	if err == nil {
		err = os.WriteFile(filepath.Join(*dir, OutputFile), out, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "recgen:", err)
		os.Exit(1)
	}
}
