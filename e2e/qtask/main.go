// Command qtask is the task command of the e2e queue tests: a task that
// works for the duration its payload names, writing to a fence-checking
// ledger. It is built by the e2e suite's TestMain; it is no part of baton.
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// run is the command of the queue tests' workers: a task that works
// for the duration its payload names ("30ms"), writing to a fence-checking
// ledger in $QLEDGER as it goes. Every write takes a flock of the ledger;
// a write whose fence is lower than the highest its key has seen is
// refused and recorded in $QLEDGER.rejected. Lines:
//
//	S,key,task,fence,attempt,worker-pid,unixnano   the attempt starts
//	W,key,task,fence,unixnano                      it works (every 10ms)
//	E,key,task,fence,unixnano                      it ends
//
// The worker's pid is the one this process's supervisor was started to
// watch (its "--parent PID" argument: baton queue work runs the command
// under a supervisor), which names the worker even when it was killed
// before the task began; else this process's grandparent.
func main() { os.Exit(run()) }

func run() int {
	path := os.Getenv("QLEDGER")
	key, task := os.Getenv("BATON_KEY"), os.Getenv("BATON_TASK")
	fence, err := strconv.ParseUint(os.Getenv("BATON_FENCE"), 10, 64)
	if path == "" || key == "" || err != nil {
		fmt.Fprintln(os.Stderr, "qtask: QLEDGER, BATON_KEY and BATON_FENCE are required")
		return 2
	}
	payload, _ := io.ReadAll(os.Stdin)
	work, err := time.ParseDuration(strings.TrimSpace(string(payload)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "qtask: payload %q is not a duration\n", payload)
		return 2
	}
	worker := workerOf(os.Getppid())
	write := func(line string) {
		if err := qledgerWrite(path, key, fence, line); err != nil {
			fmt.Fprintln(os.Stderr, "qtask:", err)
			os.Exit(1)
		}
	}
	now := func() int64 { return time.Now().UnixNano() }
	write(fmt.Sprintf("S,%s,%s,%d,%s,%d,%d", key, task, fence, os.Getenv("BATON_ATTEMPT"), worker, now()))
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	end := time.After(work)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-end:
			write(fmt.Sprintf("E,%s,%s,%d,%d", key, task, fence, now()))
			return 0
		case <-term:
			return 143
		case <-tick.C:
			write(fmt.Sprintf("W,%s,%s,%d,%d", key, task, fence, now()))
		}
	}
}

// workerOf is the worker that supervisor sup was started for: its
// "--parent PID" argument, else sup's parent.
func workerOf(sup int) int {
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(sup) + "/cmdline"); err == nil {
		args := strings.Split(string(b), "\x00")
		for i, a := range args[:max(len(args)-1, 0)] {
			if a == "--parent" {
				if pid, err := strconv.Atoi(args[i+1]); err == nil && pid > 0 {
					return pid
				}
			}
		}
	}
	return parentOf(sup)
}

// parentOf is the parent pid of pid, from /proc.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func qledgerWrite(path, key string, fence uint64, line string) error {
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	highFile := filepath.Join(filepath.Dir(path), "high."+key)
	high := uint64(0)
	if b, err := os.ReadFile(highFile); err == nil {
		high, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	target := path
	if fence < high {
		target = path + ".rejected"
	} else if fence > high {
		if err := os.WriteFile(highFile, []byte(strconv.FormatUint(fence, 10)), 0o600); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
