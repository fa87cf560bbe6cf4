// Command kvlist is the floor for a listing CLI verb (baton status, baton
// queue status): a process that connects to NATS, reads the current value
// of every key of a KV bucket matching a pattern with nats.go's watch, and
// writes each as one line, key and value, to stdout. Nothing is decoded.
// With -json it writes them as one indented JSON document instead, as a
// verb's --json does: an array of the values, each laid out by
// encoding/json's Indent.
//
//	kvlist [-json] URL BUCKET [PATTERN]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kvlist:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	asJSON := len(args) > 0 && args[0] == "-json"
	if asJSON {
		args = args[1:]
	}
	if len(args) < 2 || len(args) > 3 {
		return fmt.Errorf("usage: kvlist [-json] URL BUCKET [PATTERN]")
	}
	pattern := ">"
	if len(args) == 3 {
		pattern = args[2]
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := nats.Connect(args[0])
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, args[1])
	if err != nil {
		return err
	}
	w, err := kv.Watch(ctx, pattern, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	var doc bytes.Buffer
	n := 0
	if asJSON {
		out.WriteString("[")
	}
	for e := range w.Updates() {
		if e == nil {
			if asJSON {
				out.WriteString("\n]\n")
			}
			return out.Flush()
		}
		if asJSON {
			if n++; n > 1 {
				out.WriteByte(',')
			}
			doc.Reset()
			doc.WriteString("\n  ")
			if err := json.Indent(&doc, e.Value(), "  ", "  "); err != nil {
				return fmt.Errorf("%s: %w", e.Key(), err)
			}
			out.Write(doc.Bytes())
			continue
		}
		out.WriteString(e.Key())
		out.WriteByte('\t')
		out.Write(e.Value())
		out.WriteByte('\n')
	}
	return fmt.Errorf("the watch ended early")
}
