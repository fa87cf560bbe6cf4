package hostlocal_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/batonhq/baton/hostlocal"
)

func ExampleStateDir_TryLock() {
	dir, err := os.MkdirTemp("", "baton-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	state, err := hostlocal.OpenStateDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	since := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	gate, err := state.TryLock("slot-rendering", hostlocal.Holder{
		PID: 4242, Host: "h1", Purpose: "baton join rendering", Since: since,
	})
	if err != nil {
		log.Fatal(err)
	}

	// A second spawner is refused at once, and told who holds the gate.
	_, err = state.TryLock("slot-rendering", hostlocal.Holder{Purpose: "baton join rendering"})
	var locked *hostlocal.LockedError
	if errors.As(err, &locked) {
		fmt.Println(locked)
	}
	fmt.Println(errors.Is(err, hostlocal.ErrLocked))

	// Released, the gate is free again; Unlock is idempotent.
	if err := gate.Unlock(); err != nil {
		log.Fatal(err)
	}
	_ = gate.Unlock()
	again, err := state.TryLock("slot-rendering", hostlocal.Holder{})
	fmt.Println(err)
	_ = again.Unlock()
	// Output:
	// gate slot-rendering is held by pid 4242 (baton join rendering) on host h1 since 2026-11-22T08:00:00Z
	// true
	// <nil>
}

func ExampleStateDir_Lock() {
	dir, err := os.MkdirTemp("", "baton-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	state, err := hostlocal.OpenStateDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	held, err := state.TryLock("slot-x", hostlocal.Holder{PID: 4242, Purpose: "baton join x"})
	if err != nil {
		log.Fatal(err)
	}
	defer held.Unlock()

	// Wait up to 10 ms for the gate.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = state.Lock(ctx, "slot-x", hostlocal.Holder{})
	fmt.Println(errors.Is(err, hostlocal.ErrLocked), errors.Is(err, context.DeadlineExceeded))
	// Output:
	// true true
}

func ExampleProcess_Alive() {
	self, err := hostlocal.Self()
	if err != nil {
		fmt.Println(errors.Is(err, errors.ErrUnsupported))
		return
	}
	recycled := hostlocal.Process{PID: self.PID, Start: "another start"}
	fmt.Println(self.Alive(), recycled.Alive())
	// Output:
	// true false
}
