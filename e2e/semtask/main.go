// Command semtask is the command of the e2e semaphore tests, run by baton
// sem run: it holds its permit's units for $HOLD, writing to the ledger
// $SEMLEDGER as it goes. It is built by the e2e suite's TestMain; it is no
// part of baton. Every write takes a flock of the ledger, so the ledger's
// order is the order of the writes in time. Lines:
//
//	S,permit,fence,units,unixnano   it starts (units: "0-2-3")
//	W,permit,unixnano               it works (every 10ms)
//	E,permit,unixnano               it ends
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	path, permit := os.Getenv("SEMLEDGER"), os.Getenv("BATON_PERMIT")
	hold, err := time.ParseDuration(os.Getenv("HOLD"))
	if path == "" || permit == "" || err != nil {
		fmt.Fprintln(os.Stderr, "semtask: SEMLEDGER, BATON_PERMIT and HOLD are required")
		os.Exit(2)
	}
	units := strings.ReplaceAll(os.Getenv("BATON_SEM_UNITS"), ",", "-")
	if err := write(path, fmt.Sprintf("S,%s,%s,%s", permit, os.Getenv("BATON_FENCE"), units)); err != nil {
		fmt.Fprintln(os.Stderr, "semtask:", err)
		os.Exit(1)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	end := time.After(hold)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-end:
			if err := write(path, "E,"+permit); err != nil {
				os.Exit(1)
			}
			return
		case <-term:
			os.Exit(143)
		case <-tick.C:
			if err := write(path, "W,"+permit); err != nil {
				os.Exit(1)
			}
		}
	}
}

// write appends line and the time to the ledger under its flock.
func write(path, line string) error {
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s,%d\n", line, time.Now().UnixNano())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
