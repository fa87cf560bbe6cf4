package root_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/full"
	"github.com/batonhq/baton/cmd/baton/internal/root"
)

// clientFactory is the client program's factory, its passing to the full
// program counted and failing with errPassedOn.
func clientFactory(passed *int) (*cmdutil.Factory, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	f := &cmdutil.Factory{
		IO:     &cmdutil.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut},
		Getenv: func(string) string { return "" },
	}
	f.Full = func() error { *passed++; return errPassedOn }
	return f, out, errOut
}

var errPassedOn = errors.New("passed on")

// In the client program, a command line of the full program's verbs goes
// to the full program as it is, whatever it holds: flags, help, completion
// and bad input alike. Nothing of the verb runs in the client, not even the
// resolution of the global flags.
func TestClient_FullProgramVerbsPassTheirCommandLinesOn(t *testing.T) {
	for _, line := range []string{
		"up",
		"up --listen 127.0.0.1:4222 --ui 127.0.0.1:7070",
		"--server nats://127.0.0.1:1 up --bogus extra",
		"--timeout nonsense up",
		"up --help",
		"help up",
		"ui --listen 127.0.0.1:0",
		"mcp",
		"__complete up --l",
		"lead chat-bot --metrics 127.0.0.1:0 -- true",
		"run lint --task T --metrics 127.0.0.1:0 -- true",
		"queue work agents --metrics 127.0.0.1:0 -- true",
	} {
		passed := 0
		f, out, errOut := clientFactory(&passed)
		root.Main(t.Context(), f, strings.Fields(line), nil)
		if passed != 1 {
			t.Errorf("baton %s: passed on %d times, want once (stdout %q, stderr %q)", line, passed, out, errOut)
		}
		if !strings.Contains(errOut.String(), errPassedOn.Error()) {
			t.Errorf("baton %s: the failure to pass it on is not reported: stderr %q", line, errOut)
		}
	}
}

// The client program's own verbs, and its help, are never passed on.
func TestClient_ItsOwnVerbsRunInIt(t *testing.T) {
	for _, line := range []string{"--help", "help", "--version", "join --help", "completion bash", "join s", "lead k --metrics nonsense -- true", "frobnicate"} {
		passed := 0
		f, _, errOut := clientFactory(&passed)
		root.Main(t.Context(), f, strings.Fields(line), nil)
		if passed != 0 {
			t.Errorf("baton %s: passed on to the full program (stderr %q)", line, errOut)
		}
	}
	passed := 0
	f, out, _ := clientFactory(&passed)
	root.Main(t.Context(), f, []string{"--help"}, nil)
	for name, short := range root.FullVerbShorts() {
		if !strings.Contains(out.String(), short) {
			t.Errorf("the client's help does not list %s: %q", name, out)
		}
	}
}

// The client lists the full program's verbs by the full program's own
// summaries.
func TestClient_ListsTheFullProgramsVerbsAsItDoes(t *testing.T) {
	shorts := root.FullVerbShorts()
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{}, Getenv: func(string) string { return "" }}
	for _, v := range full.Verbs() {
		c := v.New(f, nil)
		if shorts[v.Name] != c.Short {
			t.Errorf("%s: the client lists it as %q, the full program as %q", v.Name, shorts[v.Name], c.Short)
		}
		delete(shorts, v.Name)
	}
	for name := range shorts {
		t.Errorf("the client lists %s, which the full program does not build", name)
	}
}
