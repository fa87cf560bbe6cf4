package joincmd

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
)

func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, Getenv: func(string) string { return "" }}
	var got *Options
	cmd := NewCmdJoin(f, func(o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	return got, err
}

func TestNewCmdJoin_ParsesFlags(t *testing.T) {
	o, err := parse(t, "rendering", "--task", "T-1", "--agent", "a", "--ttl", "90s", "--force", "--wait", "2s", "--meta", "k=v", "--meta", "x=y=z")
	if err != nil {
		t.Fatal(err)
	}
	fl := o.Flags
	if o.Slot != "rendering" || fl.Task != "T-1" || fl.Agent != "a" || fl.TTL.D != 90*time.Second || !fl.Force || fl.Wait.D != 2*time.Second {
		t.Errorf("options %+v flags %+v", o, fl)
	}
	meta, err := cmdutil.ParseMeta(fl.Meta)
	if err != nil || meta["k"] != "v" || meta["x"] != "y=z" {
		t.Errorf("meta %v, %v", meta, err)
	}
	if _, err := fl.JoinOptions(); err != nil {
		t.Errorf("join options: %v", err)
	}
}

func TestNewCmdJoin_DefaultTTL(t *testing.T) {
	o, err := parse(t, "s", "--task", "T")
	if err != nil || o.Flags.TTL.D != 15*time.Minute {
		t.Errorf("default ttl %v, %v", o.Flags.TTL.D, err)
	}
}

func TestNewCmdJoin_RefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"a", "b", "--task", "T"},
		{"a..b", "--task", "T"},
		{"ok", "--task", "T", "--ttl", "soon"},
		{"ok", "--task", "T", "--ttl", "-1s"},
	} {
		if _, err := parse(t, args...); !errors.Is(err, cmdutil.ErrUsage) {
			t.Errorf("join %q: %v, want a usage error", args, err)
		}
	}
	o, err := parse(t, "ok", "--task", "T", "--ttl", "500ms")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Flags.JoinOptions(); !errors.Is(err, cmdutil.ErrUsage) {
		t.Errorf("--ttl 500ms: %v, want a usage error", err)
	}
	o, _ = parse(t, "ok")
	if _, err := o.Flags.JoinOptions(); !errors.Is(err, cmdutil.ErrUsage) {
		t.Errorf("no --task: %v, want a usage error", err)
	}
}
