package main

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

// mcpRows measures claim_slot through an MCP client of the SDK, driving
// `baton mcp` over stdio as an agent's client does, against the library's
// Join in this process on the same server (the floor column here), one
// after the other in turn. Each claim is released (untimed) before the
// next round.
func (b *bench) mcpRows(ctx context.Context) ([]row, error) {
	state := mkdir(b.shm, "mcp-state")
	cmd := exec.Command(b.baton, "mcp")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + state, "BATON_URL=" + b.nats.url,
		"BATON_STATE_DIR=" + state, "BATON_HOST_ID=mcp-host"}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("start baton mcp: %w", err)
	}
	defer cs.Close()

	c, err := kv.Connect(ctx, kv.WithURL(b.nats.url), kv.WithName("bench-mcp"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sd, err := hostlocal.OpenStateDir(mkdir(b.shm, "mcp-lib-state"))
	if err != nil {
		return nil, err
	}
	m, err := session.NewManager(c, session.WithHostID("mcp-lib-host"), session.WithStateDir(sd), session.WithPIDFiles(true))
	if err != nil {
		return nil, err
	}
	run := time.Now().UnixNano()
	call := func(name string, args map[string]any) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("%s: %v", name, res.Content)
		}
		return nil
	}
	var claim, join samples
	for i := range b.ops {
		for _, side := range order(i, 2) {
			slot := fmt.Sprintf("mcp-%d-%d-%d", run, side, i)
			switch side {
			case 0:
				t0 := time.Now()
				if err := call("claim_slot", map[string]any{"slot": slot, "task": "bench", "ttl_seconds": 60}); err != nil {
					return nil, err
				}
				claim = append(claim, time.Since(t0))
				if err := call("release_slot", map[string]any{"slot": slot}); err != nil {
					return nil, err
				}
			case 1:
				t0 := time.Now()
				s, err := m.Join(ctx, slot, "bench", session.WithTTL(time.Minute))
				if err != nil {
					return nil, err
				}
				join = append(join, time.Since(t0))
				if err := m.Close(ctx, s, session.ResultSuccess); err != nil {
					return nil, err
				}
			}
		}
	}
	return []row{
		{metric: "mcp claim_slot (floor: library Join) median", unit: unitDuration,
			baton: dur(claim.median()), floor: dur(join.median()),
			goal: []cond{toFloorAtMostPlus(1.5, float64(time.Millisecond))}},
		{metric: "mcp claim_slot (floor: library Join) " + tail(b.ops), unit: unitDuration,
			baton: dur(claim.p99()), floor: dur(join.p99())},
	}, nil
}
