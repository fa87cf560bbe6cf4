package session_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// watcher, keeper and server must stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
