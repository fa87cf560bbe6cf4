// Command ratetaker is a taker of the e2e rate limiter tests: it opens a
// limiter with baton's library and takes from it as fast as it is let
// until its deadline, printing each admitted take's id. It is built by the
// e2e suite's TestMain; it is no part of baton.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/rate"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ratetaker:", err)
		os.Exit(1)
	}
}

func run() error {
	d, err := time.ParseDuration(os.Getenv("RUN_FOR"))
	if err != nil {
		return fmt.Errorf("RUN_FOR: %w", err)
	}
	ctx := context.Background()
	c, err := kv.Connect(ctx, kv.WithURL(os.Getenv("BATON_URL")), kv.WithName("ratetaker"))
	if err != nil {
		return err
	}
	defer c.Close()
	ls, err := rate.New(c)
	if err != nil {
		return err
	}
	h, err := ls.Open(ctx, os.Getenv("LIMITER"))
	if err != nil {
		return err
	}
	defer h.Close()
	fmt.Println("R")
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		tctx, cancel := context.WithDeadline(ctx, deadline)
		a, err := h.TakeWait(tctx)
		cancel()
		switch {
		case err == nil:
			fmt.Println(a.ID)
		case errors.Is(err, context.DeadlineExceeded):
		default:
			return err
		}
	}
	return nil
}
