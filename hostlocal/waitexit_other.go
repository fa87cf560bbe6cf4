//go:build !linux

package hostlocal

import "context"

// waitExit cannot wait here: WaitExit polls.
func waitExit(context.Context, Process) (bool, error) { return false, nil }
