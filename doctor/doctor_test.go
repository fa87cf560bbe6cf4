package doctor_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/doctor"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/session"
)

type env struct {
	client *kv.Client
	dir    string
	m      *session.Manager
}

func newEnv(t *testing.T, ensure bool) *env {
	t.Helper()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	dir := t.TempDir()
	return &env{client: c, dir: dir, m: manager(t, c, dir, ensure)}
}

func manager(t *testing.T, c *kv.Client, dir string, ensure bool) *session.Manager {
	t.Helper()
	sd, err := hostlocal.OpenStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := session.NewManager(c, session.WithHostID("h1"), session.WithStateDir(sd), session.WithPIDFiles(true))
	if err != nil {
		t.Fatal(err)
	}
	if ensure {
		if err := m.Ensure(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func kinds(r *doctor.Report) map[string][]doctor.Finding {
	out := map[string][]doctor.Finding{}
	for _, f := range r.Findings {
		out[f.Kind] = append(out[f.Kind], f)
	}
	return out
}

// deadProcess returns the identity of a process that has exited.
func deadProcess(t *testing.T) hostlocal.Process {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read x")
	in, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := hostlocal.LookupProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	in.Close()
	cmd.Wait()
	return p
}

func TestRun_HealthyDeploymentIsOK(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	if _, err := e.m.Join(ctx, "a", "T1"); err != nil {
		t.Fatal(err)
	}
	r, err := doctor.New(e.m).Run(ctx)
	if err != nil || !r.OK || len(r.Findings) != 0 {
		t.Fatalf("report %+v, %v; want OK", r, err)
	}
}

func TestRun_FindsEveryKindOfProblem(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	// A session whose holder process died.
	if _, err := e.m.Join(ctx, "dead", "T1", session.WithProcess(deadProcess(t))); err != nil {
		t.Fatal(err)
	}
	// A live holder that stopped renewing (stale with a tiny stale-after).
	if _, err := e.m.Join(ctx, "quiet", "T2"); err != nil {
		t.Fatal(err)
	}
	// Garbage bytes.
	if _, err := e.m.Bucket().Create(ctx, "junk", []byte{0xff, 0x00, 'x'}, 0); err != nil {
		t.Fatal(err)
	}
	// A gate file left by a process that died holding it.
	if err := os.MkdirAll(filepath.Join(e.dir, "locks"), 0o700); err != nil {
		t.Fatal(err)
	}
	holder := `{"pid":999999,"purpose":"join crashed","since":"2026-01-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(e.dir, "locks", "slot-crashed.lock"), []byte(holder), 0o600); err != nil {
		t.Fatal(err)
	}
	// A symbolic link planted at a gate's path.
	if err := os.Symlink(filepath.Join(t.TempDir(), "elsewhere"), filepath.Join(e.dir, "locks", "slot-planted.lock")); err != nil {
		t.Fatal(err)
	}
	// A pid file whose session is gone.
	gone, err := e.m.Join(ctx, "gone", "T3")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Bucket().Delete(ctx, "gone", gone.Revision, nil); err != nil {
		t.Fatal(err)
	}
	// This host's clock is an hour ahead.
	fast := func() time.Time { return time.Now().Add(time.Hour) }

	r, err := doctor.New(e.m, doctor.WithStaleAfter(time.Nanosecond), doctor.WithClock(fast)).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k := kinds(r)
	check := func(kind, key, detail string) {
		t.Helper()
		for _, f := range k[kind] {
			if f.Key == key && strings.Contains(f.Detail, detail) && f.Action != "" {
				return
			}
		}
		t.Errorf("no %s finding for %s mentioning %q in %+v", kind, key, detail, r.Findings)
	}
	check(doctor.KindDeadHolder, "dead", "not running")
	check(doctor.KindStale, "quiet", "not renewed")
	check(doctor.KindUndecodable, "junk", "does not decode")
	check(doctor.KindOrphanGate, "slot-crashed", "999999")
	check(doctor.KindOrphanPIDFile, "gone", "session is gone")
	check(doctor.KindUnusableGate, "slot-planted", "symbolic link")
	check(doctor.KindClockSkew, "h1", "ahead")
	if r.OK {
		t.Error("report OK with problems")
	}
}

func TestRun_BucketMissingAndMisconfigured(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	c := doctor.New(e.m)
	r, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f := kinds(r)[doctor.KindBucketMissing]; len(f) != 1 || !strings.Contains(f[0].Action, "baton up") {
		t.Fatalf("findings %+v, want bucket_missing saying to run baton up", r.Findings)
	}
	c.Fix(ctx, r)
	if !r.OK {
		t.Errorf("after fix: %+v", r.Findings)
	}
	if err := e.m.Ensure(ctx, 1); err != nil {
		t.Errorf("bucket after fix: %v", err)
	}

	// Someone recreated it with a bucket TTL that would cut sessions short.
	if err := e.client.DeleteBucket(ctx, e.m.Bucket().Name()); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(e.client.Conn())
	// The server removes a deleted stream's files after it answers: a
	// stream of the same name created at once can find them still there
	// (error 10049, "error creating store") on a loaded host.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: e.m.Bucket().Name(), TTL: 5 * time.Second})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	r, err = c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := kinds(r)[doctor.KindBucketConfig]
	if len(f) != 1 || !strings.Contains(f[0].Detail, "ttl is 5s") {
		t.Fatalf("findings %+v, want bucket_config naming the TTL", r.Findings)
	}
	c.Fix(ctx, r)
	if r2, _ := c.Run(ctx); !r2.OK {
		t.Errorf("after fix: %+v", r2.Findings)
	}
}

func TestFix_RemovesStaleButNotWhatWasRenewedMeanwhile(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	renewed, err := e.m.Join(ctx, "renewed", "T1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Join(ctx, "abandoned", "T2"); err != nil {
		t.Fatal(err)
	}
	c := doctor.New(e.m, doctor.WithStaleAfter(time.Nanosecond))
	r, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(kinds(r)[doctor.KindStale]); n != 2 {
		t.Fatalf("%d stale findings, want 2: %+v", n, r.Findings)
	}
	// The holder of "renewed" commits between the report and the fix.
	if _, err := e.m.Commit(ctx, renewed, "still here"); err != nil {
		t.Fatal(err)
	}
	c.Fix(ctx, r)
	for _, f := range r.Findings {
		switch f.Key {
		case "renewed":
			if f.Fixed || f.FixError == "" {
				t.Errorf("renewed session fixed: %+v", f)
			}
		case "abandoned":
			if !f.Fixed {
				t.Errorf("abandoned session not fixed: %+v", f)
			}
		}
	}
	if _, err := e.m.Get(ctx, "renewed"); err != nil {
		t.Errorf("renewed session removed: %v", err)
	}
	if _, err := e.m.Get(ctx, "abandoned"); err == nil {
		t.Error("abandoned session survived the fix")
	}
	if r.OK {
		t.Error("report OK with an unfixed finding")
	}
}

func TestFix_ClearsOrphansAndGarbage(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	if _, err := e.m.Bucket().Create(ctx, "junk", []byte("garbage"), 0); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(e.dir, "locks"), 0o700)
	os.WriteFile(filepath.Join(e.dir, "locks", "slot-x.lock"), []byte(`{"pid":999999}`), 0o600)
	// Fresh garbage is reported but not removed: it may be a live record
	// of a newer baton. Once stale, --fix removes it.
	fresh := doctor.New(e.m)
	r, err := fresh.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fresh.Fix(ctx, r)
	if f := kinds(r)[doctor.KindUndecodable]; len(f) != 1 || f[0].Fixed || f[0].Fixable() {
		t.Fatalf("fresh undecodable record: %+v, want reported and not fixable", f)
	}
	if _, err := e.m.Bucket().Latest(ctx, "junk"); err != nil {
		t.Fatalf("fresh garbage removed: %v", err)
	}
	c := doctor.New(e.m, doctor.WithStaleAfter(time.Nanosecond))
	if r, err = c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	c.Fix(ctx, r)
	if !r.OK {
		t.Fatalf("after fix: %+v", r.Findings)
	}
	if r2, _ := c.Run(ctx); !r2.OK {
		t.Errorf("second check: %+v", r2.Findings)
	}
}

func TestRun_UnreachableServerIsAnError(t *testing.T) {
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL(), kv.WithTimeout(time.Second))
	m := manager(t, c, t.TempDir(), true)
	s.Shutdown()
	if _, err := doctor.New(m).Run(context.Background()); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("doctor of a stopped server: %v, want kv.ErrUnavailable", err)
	}
}

func TestFix_PIDFiles(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	pids := filepath.Join(e.dir, "pids", "baton")
	if err := os.MkdirAll(pids, 0o700); err != nil {
		t.Fatal(err)
	}
	// A pid file that does not decode.
	if err := os.WriteFile(filepath.Join(pids, "slot-foo.pid"), []byte("{{"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A pid file whose session is gone, whose slot is joined again between
	// the check and the fix: that join's pid file must survive.
	s, err := e.m.Join(ctx, "again", "T1")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Bucket().Delete(ctx, "again", s.Revision, nil); err != nil {
		t.Fatal(err)
	}
	c := doctor.New(e.m)
	r, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(kinds(r)[doctor.KindOrphanPIDFile]); n != 2 {
		t.Fatalf("%d orphan pid files reported, want 2: %+v", n, r.Findings)
	}
	if _, err := e.m.Join(ctx, "again", "T2"); err != nil {
		t.Fatal(err)
	}
	c.Fix(ctx, r)
	for _, f := range r.Findings {
		if f.Key == "foo" && !f.Fixed {
			t.Errorf("undecodable pid file not removed: %+v", f)
		}
		if f.Key == "again" && f.Fixed {
			t.Errorf("the pid file of a join made after the check was removed: %+v", f)
		}
	}
	if _, err := os.Stat(filepath.Join(pids, "slot-foo.pid")); !os.IsNotExist(err) {
		t.Errorf("slot-foo.pid still there: %v", err)
	}
	if r2, _ := c.Run(ctx); !r2.OK {
		t.Errorf("after fix: %+v", r2.Findings)
	}
}

// WithListing: the sessions checked are the listing's, not the bucket's
// (a dashboard passes the sessions its watch holds), and a listing that
// cannot be read is the run's error.
func TestRun_WithListingChecksThoseSessions(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	if _, err := e.m.Join(ctx, "in-bucket", "T1"); err != nil {
		t.Fatal(err)
	}
	now, err := e.m.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := &session.Session{Record: session.Record{Slot: "held-elsewhere", TaskID: "T2", Host: "h2", Fence: 7,
		StartedAt: now.Add(-time.Hour), RenewedAt: now.Add(-time.Hour)}, Revision: 7, Written: now.Add(-time.Hour), TTL: time.Minute}
	listed := 0
	r, err := doctor.New(e.m, doctor.WithListing(func(context.Context) (*session.Listing, error) {
		listed++
		return &session.Listing{Sessions: []*session.Session{held}, ServerTime: now}, nil
	})).Run(ctx)
	if err != nil || listed != 1 {
		t.Fatalf("run: %v, listing read %d times", err, listed)
	}
	stale := kinds(r)[doctor.KindStale]
	if len(stale) != 1 || stale[0].Key != "held-elsewhere" {
		t.Errorf("stale findings %+v; want the listing's session only (the bucket's is live and not listed)", stale)
	}

	boom := errors.New("listing failed")
	if _, err := doctor.New(e.m, doctor.WithListing(func(context.Context) (*session.Listing, error) { return nil, boom })).Run(ctx); !errors.Is(err, boom) {
		t.Errorf("run with a listing that fails: %v, want %v", err, boom)
	}
}
