package e2e

import (
	"fmt"
	"io"
	"os"

	"github.com/batonhq/baton/hostlocal"
)

// The test binary doubles as a helper process (TestMain dispatches on
// envHelper): "gate" takes a host gate in $E2E_STATE like a joining baton
// would, prints "locked" and holds it until stdin closes or it is killed.
const envHelper = "BATON_E2E_HELPER"

func helperMain() int {
	switch os.Getenv(envHelper) {
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
