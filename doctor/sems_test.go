package doctor_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/doctor"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
)

func TestSems_DeadHoldersAndUndecodableRecords(t *testing.T) {
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	ctx := context.Background()
	m, err := session.NewManager(c, session.WithHostID("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Ensure(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ss, err := sem.New(c, sem.WithHostID("h1"))
	if err != nil {
		t.Fatal(err)
	}
	chk := doctor.New(m, doctor.WithSemaphores(ss))
	// No limits bucket: a finding, fixed by creating it.
	r, err := chk.Run(ctx)
	if err != nil || len(r.Findings) != 1 || r.Findings[0].Kind != doctor.KindBucketMissing {
		t.Fatalf("without the bucket: %+v, %v", r, err)
	}
	chk.Fix(ctx, r)
	if _, err := ss.Create(ctx, "db", 2); err != nil {
		t.Fatal(err)
	}
	// A permit of a process of this host that has exited, and a unit with
	// no TTL that does not decode.
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dead, err := hostlocal.LookupProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	gone, err := sem.New(c, sem.WithHostID("h1"), sem.WithProcess(dead))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.TryAcquire(ctx, "db", sem.WithTTL(time.Minute), sem.WithoutKeepAlive()); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Bucket().Create(ctx, "sem.db.1", []byte("{"), 0); err != nil {
		t.Fatal(err)
	}
	r, err = chk.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, f := range r.Findings {
		kinds[f.Key] = f.Kind
	}
	if kinds["sem.db.0"] != doctor.KindDeadHolder || kinds["sem.db.1"] != doctor.KindUndecodable || len(r.Findings) != 2 {
		t.Fatalf("findings: %+v", r.Findings)
	}
	chk.Fix(ctx, r)
	if r.Remaining() != 0 {
		t.Fatalf("after --fix: %+v", r.Findings)
	}
	st, err := ss.Status(ctx, "db")
	if err != nil || st.Free != 2 {
		t.Fatalf("after --fix: %+v, %v; want both units free", st, err)
	}
	for _, f := range r.Findings {
		if !strings.Contains(f.Detail, "semaphore db") {
			t.Errorf("finding does not name the semaphore: %s", f.Detail)
		}
	}

	// A rate limiter whose record does not decode is reported.
	rl, err := rate.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rl.Bucket().Create(ctx, "rate.api", []byte(`{"name":"api"}`), 0); err != nil {
		t.Fatal(err)
	}
	r, err = doctor.New(m, doctor.WithLimiters(rl)).Run(ctx)
	if err != nil || len(r.Findings) != 1 || r.Findings[0].Key != "rate.api" || r.Findings[0].Kind != doctor.KindUndecodable {
		t.Fatalf("findings with a broken limiter: %+v, %v", r, err)
	}
}
