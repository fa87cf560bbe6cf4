package cmdutil

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

func tracedFactory(t *testing.T, url, trace string) *Factory {
	t.Helper()
	env := map[string]string{TraceEnv: trace}
	f := &Factory{Config: Config{Server: url, Timeout: 5 * time.Second}, Getenv: func(k string) string { return env[k] }}
	t.Cleanup(f.Close)
	return f
}

func TestFactory_TracesKVCallsToTheFileOfBatonKVTrace(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(`{"ev":"call","client":"earlier","id":1}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := tracedFactory(t, s.ClientURL(), path)
	c, err := f.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Ensure(ctx, kv.BucketConfig{Name: "t", MarkerTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()

	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var lines []kv.TraceLine
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		var l kv.TraceLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 3 || lines[0].Client != "earlier" {
		t.Fatalf("trace holds %+v, want the earlier line and one call and return appended", lines)
	}
	if call, ret := lines[1], lines[2]; call.Op != kv.TraceCreate || call.Key != "k" || ret.Outcome != kv.OutcomeOK || ret.ID != call.ID {
		t.Errorf("trace holds %+v, %+v; want the create and its return", call, ret)
	}
}

func TestFactory_TraceFileIsPrivateAndNeverALink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.jsonl")
	f := tracedFactory(t, "nats://127.0.0.1:1", path)
	if _, err := f.Tracer(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("trace file: %v, mode %v, want 0600", err, fi.Mode())
	}

	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	f = tracedFactory(t, "nats://127.0.0.1:1", link)
	if _, err := f.Client(context.Background()); !errors.Is(err, ErrUsage) {
		t.Fatalf("client with the trace a symbolic link: %v, want a usage error", err)
	}
	// Callers of ConnectOptions alone (baton up) fail to connect with it.
	if _, err := kv.Connect(context.Background(), append([]kv.Option{kv.WithURL("nats://127.0.0.1:1")}, f.ConnectOptions()...)...); !errors.Is(err, ErrUsage) {
		t.Fatalf("connect with the trace a symbolic link: %v, want a usage error", err)
	}
	if fi, err := os.Stat(target); err != nil || fi.Size() != 0 {
		t.Errorf("the link's target was written: %v", err)
	}
}

func TestFactory_NoTraceWithoutTheVariable(t *testing.T) {
	f := tracedFactory(t, "nats://127.0.0.1:1", "")
	if tr, err := f.Tracer(); tr != nil || err != nil {
		t.Errorf("Tracer() = %v, %v without %s", tr, err, TraceEnv)
	}
}
