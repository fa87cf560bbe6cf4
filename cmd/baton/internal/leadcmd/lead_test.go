package leadcmd

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
)

func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, Getenv: func(string) string { return "" }}
	var got *Options
	cmd := NewCmdLead(f, func(o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	return got, cmd.Execute()
}

func TestNewCmdLead_ParsesFlagsAndTheCommand(t *testing.T) {
	o, err := parse(t, "chat", "--ttl", "5s", "--min-term", "1m", "--score", "7", "--capability", "gpu",
		"--capability", "ssd", "--require", "gpu", "--grace", "2s", "--", "./bot", "--answer")
	if err != nil {
		t.Fatal(err)
	}
	if o.Key != "chat" || o.TTL.D != 5*time.Second || o.MinTerm.D != time.Minute || o.Score != 7 || o.Grace.D != 2*time.Second ||
		!slices.Equal(o.Capabilities, []string{"gpu", "ssd"}) || !slices.Equal(o.Require, []string{"gpu"}) ||
		!slices.Equal(o.Command, []string{"./bot", "--answer"}) {
		t.Errorf("options %+v", o)
	}
}

func TestNewCmdLead_RefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"chat"},
		{"chat", "./bot"},
		{"--", "./bot"},
		{"a..b", "--", "./bot"},
		{"chat", "--ttl", "soon", "--", "./bot"},
		{"chat", "--min-term", "-1s", "--", "./bot"},
	} {
		if _, err := parse(t, args...); !errors.Is(err, cmdutil.ErrUsage) {
			t.Errorf("lead %q: %v, want a usage error", args, err)
		}
	}
}
