package cmdutil

import (
	"strconv"

	"github.com/spf13/cobra"
)

// FenceFlag registers --fence on cmd.
func FenceFlag(cmd *cobra.Command, dst *uint64) {
	cmd.Flags().Uint64Var(dst, "fence", 0, "act only if the slot's session has this fence (default: $BATON_FENCE when $BATON_SLOT is the slot, as in a `baton run` child)")
}

// Fence is the fence a verb on slot must check: --fence if given, else
// BATON_FENCE when BATON_SLOT names the same slot (a command started by
// `baton run`), else 0 (none).
func (f *Factory) Fence(slot string, flag uint64) (uint64, error) {
	if flag != 0 {
		return flag, nil
	}
	if f.Getenv("BATON_SLOT") != slot {
		return 0, nil
	}
	v := f.Getenv("BATON_FENCE")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, Usagef("BATON_FENCE=%q: not a fence", v)
	}
	return n, nil
}
