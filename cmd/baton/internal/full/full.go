// Package full is what the full program links beyond the client
// program's verbs: `baton up` (the NATS server), `baton ui` (the dashboard
// and client_golang), `baton mcp` (the MCP SDK) and the --metrics of lead,
// run and queue work. The client program, which is what the kernel starts
// for every baton command, links none of it and passes those command lines
// to the full program it carries (ADR 0030).
package full

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/mcpcmd"
	"github.com/batonhq/baton/cmd/baton/internal/procmetrics/prom"
	"github.com/batonhq/baton/cmd/baton/internal/root"
	"github.com/batonhq/baton/cmd/baton/internal/uicmd"
	"github.com/batonhq/baton/cmd/baton/internal/upcmd"
	"github.com/batonhq/baton/internal/carry"
)

// Verbs are the full program's own verbs, for root.Main.
func Verbs() []root.FullVerb {
	return []root.FullVerb{
		{Name: "up", New: func(f *cmdutil.Factory, stub root.RunStub) *cobra.Command {
			return upcmd.NewCmdUp(f, root.Stubbed[*upcmd.Options](stub, "up"))
		}},
		{Name: "ui", New: func(f *cmdutil.Factory, stub root.RunStub) *cobra.Command {
			return uicmd.NewCmdUI(f, root.Stubbed[*uicmd.Options](stub, "ui"))
		}},
		{Name: "mcp", New: func(f *cmdutil.Factory, stub root.RunStub) *cobra.Command {
			return mcpcmd.NewCmdMCP(f, root.Stubbed[*mcpcmd.Options](stub, "mcp"))
		}},
	}
}

// Setup makes f the full program's: it serves --metrics, and its
// supervisors are the client program that started it (carry.ClientEnv,
// taken out of the environment so that no command baton runs inherits it),
// else this program.
func Setup(f *cmdutil.Factory) {
	f.ServeMetrics = prom.Start
	if exe := os.Getenv(carry.ClientEnv); exe != "" {
		_ = os.Unsetenv(carry.ClientEnv)
		if fi, err := os.Stat(exe); err == nil && fi.Mode().IsRegular() && filepath.IsAbs(exe) {
			f.Supervisor = exe
		}
	}
}
