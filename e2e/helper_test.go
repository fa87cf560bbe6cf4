package e2e

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batonhq/baton/hostlocal"
)

// The test binary doubles as a helper process (TestMain dispatches on
// envHelper): "gate" takes a host gate in $E2E_STATE like a joining baton
// would, prints "locked" and holds it until stdin closes or it is killed.
const envHelper = "BATON_E2E_HELPER"

func helperMain() int {
	switch os.Getenv(envHelper) {
	case "ledger":
		return ledgerMain()

	case "gate":
		sd, err := hostlocal.OpenStateDir(os.Getenv("E2E_STATE"))
		if err != nil {
			fmt.Println("error:", err)
			return 2
		}
		l, err := sd.TryLock(os.Getenv("E2E_GATE"), hostlocal.Holder{Host: os.Getenv("BATON_HOST_ID"), Purpose: "baton join (e2e helper)"})
		if err != nil {
			fmt.Println("error:", err)
			return 2
		}
		fmt.Println("locked")
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = l.Unlock()
		return 0
	}
	return 2
}

// ledgerMain is the protected resource of the fencing tests, as the
// command of `baton lead`: every 20 ms it appends "fence,instance,unixnano"
// to $LEDGER, refusing (and recording in $LEDGER.rejected) a write whose
// fence is lower than the highest written so far. Writers serialise on a
// flock of $LEDGER.lock; $LEDGER.high holds the highest fence.
func ledgerMain() int {
	path := os.Getenv("LEDGER")
	fence, err := strconv.ParseUint(os.Getenv("BATON_FENCE"), 10, 64)
	if path == "" || err != nil {
		fmt.Fprintln(os.Stderr, "ledger: LEDGER and BATON_FENCE are required")
		return 2
	}
	instance := os.Getenv("BATON_INSTANCE")
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println("writing with fence", fence)
	for {
		if err := ledgerWrite(path, fence, instance); err != nil {
			fmt.Fprintln(os.Stderr, "ledger:", err)
			return 1
		}
		select {
		case <-term:
			return 0
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func ledgerWrite(path string, fence uint64, instance string) error {
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	high := uint64(0)
	if b, err := os.ReadFile(path + ".high"); err == nil {
		high, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	line := fmt.Sprintf("%d,%s,%d\n", fence, instance, time.Now().UnixNano())
	target := path
	if fence < high {
		target = path + ".rejected"
	} else if err := os.WriteFile(path+".high", []byte(strconv.FormatUint(fence, 10)), 0o600); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
