package cmdutil

import (
	"github.com/spf13/cobra"
)

// OneSlot accepts exactly one argument, a valid slot name.
func OneSlot(usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return Usagef("want exactly one SLOT: %s", usage)
		}
		return ValidSlot("slot", args[0])
	}
}

// NoArgs accepts no arguments.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("%s takes no arguments, got %q", cmd.Name(), args)
	}
	return nil
}

// OneKey accepts exactly one argument, a valid lease or agent key.
func OneKey(usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return Usagef("want exactly one KEY: %s", usage)
		}
		return ValidSlot("key", args[0])
	}
}
