package queue_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// worker, watch and server must stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
