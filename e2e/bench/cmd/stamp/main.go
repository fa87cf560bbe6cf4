// Command stamp prints the time it started, in Unix nanoseconds, and
// exits: the child of the benchmark's `baton queue work`, so that the
// dispatch of a task is timed to the moment its command runs. It is small,
// so that its own start-up costs little.
package main

import (
	"os"
	"strconv"
	"time"
)

func main() {
	now := time.Now().UnixNano()
	_, _ = os.Stdout.WriteString(strconv.FormatInt(now, 10) + "\n")
}
