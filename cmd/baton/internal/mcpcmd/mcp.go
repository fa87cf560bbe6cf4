// Package mcpcmd is `baton mcp`.
package mcpcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/mcpserver"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/sem"
)

// Options are mcp's inputs.
type Options struct {
	F *cmdutil.Factory
}

// NewCmdMCP returns `baton mcp`; runF replaces the run for tests.
func NewCmdMCP(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve baton's tools to a coding agent over MCP (stdio)",
		Long: `Serve the Model Context Protocol on stdin and stdout, for an agent's MCP
client to start as a child: the agent then claims, holds, releases and
inspects slots through tools (claim_slot, heartbeat, release_slot, who_holds,
list_sessions), holds leases (acquire_lease, release_lease), asks who leads
(leader), checks health (doctor, report only) and uses work queues
(queue_add, queue_status, queue_get), with no shell. The resource
baton://status is the status --json document; subscribers are told when it
changes.

A slot claimed through baton mcp records the agent (this process's parent)
as its holder, and is renewed in the background on the schedule baton run
uses, however long the agent thinks between calls; leases likewise. When the
client closes the connection, or the agent exits, every slot still held is
closed with result fail and every lease released. If baton
mcp is killed outright, its slots expire by their TTL, or are free at once
to a join on this host once the agent's process is gone.

The baton server need not be up when baton mcp starts: each tool call
connects if need be, and says so in its result when the server cannot be
reached. The global flags (--server, --context, --creds, --prefix,
--host-id, --state-dir) apply. stdout carries the protocol only;
reconnection notices go to stderr.`,
		Example: `  # Claude Code
  claude mcp add baton -- baton mcp

  # any client's JSON config
  {"mcpServers": {"baton": {"command": "baton", "args": ["mcp", "--server", "nats://nats.internal:4222"]}}}`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(o)
			}
			return mcpRun(cmd.Context(), o)
		},
	}
	return cmd
}

func mcpRun(ctx context.Context, o *Options) error {
	agent, err := hostlocal.LookupProcess(os.Getppid())
	if err != nil {
		return fmt.Errorf("baton mcp: its parent, the agent, is gone: %w", err)
	}
	f := o.F
	connect := func(ctx context.Context) (*mcpserver.Conn, error) {
		m, err := f.Sessions(ctx, f.LongLived("mcp", nil)...)
		if err != nil {
			return nil, err
		}
		ls, err := f.Leases(ctx, "", []lease.Option{lease.WithProcess(agent)})
		if err != nil {
			return nil, err
		}
		qs, err := f.Queues(ctx)
		if err != nil {
			return nil, err
		}
		ss, err := f.Semaphores(ctx, []sem.Option{sem.WithProcess(agent)})
		if err != nil {
			return nil, err
		}
		rl, err := f.Limiters(ctx)
		if err != nil {
			return nil, err
		}
		sp, err := f.Spaces(ctx, []reserve.Option{reserve.WithProcess(agent)})
		if err != nil {
			return nil, err
		}
		return &mcpserver.Conn{Sessions: m, Leases: ls, Queues: qs, Sems: ss, Limiters: rl, Spaces: sp}, nil
	}
	srv, err := mcpserver.New(connect, mcpserver.WithAgentProcess(agent), mcpserver.WithVersion(cmdutil.Version()), mcpserver.WithLog(f.IO.ErrOut))
	if err != nil {
		return err
	}
	// SIGINT, SIGTERM and SIGHUP end it as a disconnect does: the slots it
	// holds are closed first.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	t := &mcp.IOTransport{Reader: readCloser(f.IO.In), Writer: writeCloser(f.IO.Out)}
	return srv.Serve(ctx, t)
}

// readCloser is r, closed if it can be.
func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

// writeCloser is w, closed if it can be.
func writeCloser(w io.Writer) io.WriteCloser {
	if wc, ok := w.(io.WriteCloser); ok {
		return wc
	}
	return nopWriteCloser{w}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
