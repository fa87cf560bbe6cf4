//go:build !linux

package hostlocal

// exitHandle is never valid here: Exited checks each process with Alive.
type exitHandle struct{}

func (exitHandle) valid() bool         { return false }
func (exitHandle) close()              {}
func openExit(Process) exitHandle      { return exitHandle{} }
func pollExits(hs []exitHandle) []bool { return make([]bool, len(hs)) }
