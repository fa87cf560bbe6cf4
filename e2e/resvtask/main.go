// Command resvtask is the command of the e2e path reservation tests, run
// by baton reserve run: it holds its reservation for $HOLD, writing to the
// ledger $RESVLEDGER as it goes. It is built by the e2e suite's TestMain;
// it is no part of baton. Every write takes a flock of the ledger, so the
// ledger's order is the order of the writes in time. Lines:
//
//	S,id,fence,mode,patterns,unixnano   it starts (mode x or s; patterns space-separated)
//	W,id,unixnano                       it works (every 5ms)
//	E,id,unixnano                       it ends
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	path, id := os.Getenv("RESVLEDGER"), os.Getenv("BATON_RESERVATION")
	hold, err := time.ParseDuration(os.Getenv("HOLD"))
	if path == "" || id == "" || err != nil {
		fmt.Fprintln(os.Stderr, "resvtask: RESVLEDGER, BATON_RESERVATION and HOLD are required")
		os.Exit(2)
	}
	if err := write(path, fmt.Sprintf("S,%s,%s,%s,%s", id, os.Getenv("BATON_FENCE"), os.Getenv("RESV_MODE"), os.Getenv("RESV_PATTERNS"))); err != nil {
		fmt.Fprintln(os.Stderr, "resvtask:", err)
		os.Exit(1)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	end := time.After(hold)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-end:
			if err := write(path, "E,"+id); err != nil {
				os.Exit(1)
			}
			return
		case <-term:
			os.Exit(143)
		case <-tick.C:
			if err := write(path, "W,"+id); err != nil {
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
