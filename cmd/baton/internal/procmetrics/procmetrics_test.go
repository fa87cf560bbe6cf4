package procmetrics

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/queue"
)

func TestCheckAddr(t *testing.T) {
	for addr, ok := range map[string]bool{
		"": true, "127.0.0.1:9464": true, ":9464": true, "[::1]:0": true, "localhost:65535": true,
		"9464": false, "h:http": false, "h:70000": false, "h:-1": false, "h:09": false, "[::1": false,
	} {
		err := CheckAddr(addr)
		if (err == nil) != ok {
			t.Errorf("CheckAddr(%q) = %v, want ok %v", addr, err, ok)
		}
		if err != nil && cmdutil.Code(err) != cmdutil.ExitUsage {
			t.Errorf("CheckAddr(%q): exit %d, want %d", addr, cmdutil.Code(err), cmdutil.ExitUsage)
		}
	}
}

func factory() *cmdutil.Factory {
	return &cmdutil.Factory{IO: &cmdutil.IOStreams{ErrOut: io.Discard}, Getenv: func(string) string { return "" }}
}

// Without an address nothing is served or hooked, and what the verb records
// goes nowhere.
func TestStart_WithoutAnAddressRecordsNothing(t *testing.T) {
	f := factory()
	served := false
	f.ServeMetrics = func(context.Context, *cmdutil.Factory, string, string, func(string) string, ...string) (cmdutil.ProcessMetrics, func(), error) {
		served = true
		return nil, nil, nil
	}
	m, stop, err := Start(t.Context(), f, "run", "", Kind(KindSession))
	if err != nil || served || f.RenewHook != nil {
		t.Fatalf("Start without an address: err %v, served %v, hook set %v", err, served, f.RenewHook != nil)
	}
	m.Watch("k")
	m.Gained("k")
	m.Lost("k", LostExit)
	m.Serving("q")
	m.TaskEvent("q", queue.Event{Kind: queue.EventStarted})
	stop()
}

// With an address, the full program serves; the client program passes the
// command line on, and Start returns only the failure to pass it.
func TestStart_WithAnAddressServesOrPassesOn(t *testing.T) {
	f := factory()
	var got string
	f.ServeMetrics = func(_ context.Context, _ *cmdutil.Factory, verb, addr string, _ func(string) string, _ ...string) (cmdutil.ProcessMetrics, func(), error) {
		got = verb + " " + addr
		return none{}, func() {}, nil
	}
	if _, _, err := Start(t.Context(), f, "lead", "127.0.0.1:0", Kind(KindLeader)); err != nil || got != "lead 127.0.0.1:0" {
		t.Errorf("full program: err %v, served %q", err, got)
	}
	f = factory()
	failed := errors.New("no full program")
	passed := 0
	f.Full = func() error { passed++; return failed }
	if _, _, err := Start(t.Context(), f, "lead", "127.0.0.1:0", Kind(KindLeader)); !errors.Is(err, failed) || passed != 1 {
		t.Errorf("client program: err %v after %d handovers, want the handover's failure after 1", err, passed)
	}
	if _, _, err := Start(t.Context(), factory(), "lead", "127.0.0.1:0", Kind(KindLeader)); err == nil {
		t.Error("a program with neither: no error")
	}
}
