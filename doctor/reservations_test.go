package doctor_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/doctor"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/kv/kvtest"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/session"
)

// TestReservations_ExpiredDeadUndecodableAndLarge: a space keeps a
// reservation past its TTL and one whose holder died on this host; another
// record does not decode; a third has passed half the server's largest
// message. --fix rewrites the first space without the two and leaves the
// others reported.
func TestReservations_ExpiredDeadUndecodableAndLarge(t *testing.T) {
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := session.NewManager(c, session.WithHostID("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Ensure(ctx, 1); err != nil {
		t.Fatal(err)
	}
	spaces := func(host string, opts ...reserve.Option) *reserve.Spaces {
		rs, err := reserve.New(c, append([]reserve.Option{reserve.WithHostID(host)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	rs, other := spaces("h1"), spaces("h2")
	chk := doctor.New(m, doctor.WithReservations(rs))
	// No limits bucket yet: nothing to say of reservations.
	if r, err := chk.Run(ctx); err != nil || !r.OK {
		t.Fatalf("without the bucket: %+v, %v", r, err)
	}
	if err := rs.Ensure(ctx, 1); err != nil {
		t.Fatal(err)
	}

	const space = "github.com/acme/app"
	// Not renewed: a renewal would write the space, and drop bob's.
	live, err := other.TryReserve(ctx, space, []string{"README.md"}, reserve.WithAgent("alice"), reserve.WithTTL(time.Minute), reserve.WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = live.Release(context.Background()) }()
	if _, err := other.TryReserve(ctx, space, []string{"docs/**"}, reserve.WithAgent("bob"), reserve.WithTTL(time.Second), reserve.WithoutKeepAlive()); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dead, err := hostlocal.LookupProcess(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spaces("h1", reserve.WithProcess(dead)).TryReserve(ctx, space, []string{"src/**"}, reserve.WithAgent("carol"),
		reserve.WithTTL(time.Minute), reserve.WithoutKeepAlive()); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := rs.Bucket().Create(ctx, reserve.KeyPrefix+"junk", []byte("{not json"), time.Minute); err != nil {
		t.Fatal(err)
	}
	// A record of more than half a message: one reservation with a large
	// meta value (the server takes 1 MB by default).
	big := reserve.Record{Space: "big", Entries: []reserve.Entry{{ID: "r1", Patterns: []string{"**"}, Host: "h9", PID: 1,
		TTL: jsonrec.Duration(time.Minute), Meta: map[string]string{"note": strings.Repeat("x", 600_000)}}}}
	data, err := big.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Bucket().Create(ctx, reserve.Key("big"), data, time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // bob's reservation expires

	r, err := chk.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]doctor.Finding{}
	for _, f := range r.Findings {
		got[f.Kind+" "+f.Key] = f
	}
	want := []string{
		doctor.KindExpiredVisible + " " + space, doctor.KindDeadHolder + " " + space,
		doctor.KindUndecodable + " resv.junk", doctor.KindSpaceLarge + " big",
	}
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("no finding %q in %+v", k, r.Findings)
		}
	}
	if len(r.Findings) != len(want) {
		t.Fatalf("findings: %+v", r.Findings)
	}
	if f := got[doctor.KindExpiredVisible+" "+space]; !strings.Contains(f.Detail, `agent "bob"`) || !f.Fixable() {
		t.Errorf("expired: %+v", f)
	}
	if f := got[doctor.KindDeadHolder+" "+space]; !strings.Contains(f.Detail, `agent "carol"`) || !f.Fixable() {
		t.Errorf("dead holder: %+v", f)
	}
	if got[doctor.KindUndecodable+" resv.junk"].Fixable() || got[doctor.KindSpaceLarge+" big"].Fixable() {
		t.Error("an undecodable or large space has a fix; want it reported only")
	}

	chk.Fix(ctx, r)
	if r.Remaining() != 2 {
		t.Fatalf("after --fix: %+v", r.Findings)
	}
	st, err := rs.Status(ctx, space)
	if err != nil || len(st.Reservations) != 1 || st.Reservations[0].Agent != "alice" {
		t.Fatalf("after --fix: %+v, %v; want alice's alone", st, err)
	}
	r, err = chk.Run(ctx)
	if err != nil || len(r.Findings) != 2 {
		t.Fatalf("after --fix, checked again: %+v, %v", r, err)
	}
}
