// Command kvlist is the floor for a listing CLI verb (baton status, baton
// queue status): a process that connects to NATS, reads the current value
// of every key of a KV bucket matching a pattern with nats.go's watch, and
// writes each as one line, key and value, to stdout. Nothing is decoded.
//
//	kvlist URL BUCKET [PATTERN]
package main

import (
	"bufio"
	"context"
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
	if len(args) < 2 || len(args) > 3 {
		return fmt.Errorf("usage: kvlist URL BUCKET [PATTERN]")
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
	for e := range w.Updates() {
		if e == nil {
			return out.Flush()
		}
		out.WriteString(e.Key())
		out.WriteByte('\t')
		out.Write(e.Value())
		out.WriteByte('\n')
	}
	return fmt.Errorf("the watch ended early")
}
