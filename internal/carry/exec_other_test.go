//go:build !unix

package carry

import (
	"errors"
	"strings"
	"testing"
)

func TestExec_SaysItIsUnsupportedWhereThereIsNoExec(t *testing.T) {
	err := Exec([]string{"baton", "up"}, nil)
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Exec: %v, want ErrUnsupported", err)
	}
	if !strings.Contains(err.Error(), "up, ui, mcp, --metrics") {
		t.Errorf("Exec: %q does not say what is unsupported", err)
	}
}
