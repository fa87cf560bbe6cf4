package cmdutil

import (
	"strconv"

	"github.com/spf13/cobra"
)

// FenceFlag registers --fence on cmd.
func FenceFlag(cmd *cobra.Command, dst *uint64) {
	cmd.Flags().Var((*fenceValue)(dst), "fence", "act only if the slot's session has this fence, so a replaced holder is refused (default: $BATON_FENCE when $BATON_SLOT is the slot, as in a command started by 'baton run')")
}

// fenceValue is a fence flag: a positive integer.
type fenceValue uint64

func (v *fenceValue) String() string {
	if *v == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(*v), 10)
}

func (v *fenceValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return Usagef("--fence %q: a fence is a positive integer, as join prints it", s)
	}
	*v = fenceValue(n)
	return nil
}

func (v *fenceValue) Type() string { return "N" }

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
