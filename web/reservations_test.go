package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/web"
)

// TestReservations_ASpaceShowsItsHoldersAndItsLineLive: a space named like
// a repository (its key a hash, its name with '/') shows what is held,
// exclusive and shared, and the waiter in line; a release hands the paths
// to the waiter and the view, the events and the metrics follow, with no
// read of KV but the watch.
func TestReservations_ASpaceShowsItsHoldersAndItsLineLive(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const space = "github.com/acme/app"
	es := openEvents(t, e.http.URL+"/api/v1/events?kinds=space")
	if name, _, err := es.next(); err != nil || name != "hello" {
		t.Fatalf("first event %q %v, want hello", name, err)
	}
	alice, err := e.rs.TryReserve(ctx, space, []string{"src/parser/**", "docs/api.md"}, reserve.WithAgent("alice"), reserve.WithTask("T-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = alice.Release(context.Background()) }()
	var readers []*reserve.Reservation
	for _, agent := range []string{"bob", "carol"} {
		r, err := e.rs.TryReserve(ctx, space, []string{"README.md"}, reserve.Shared(), reserve.WithAgent(agent))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = r.Release(context.Background()) }()
		readers = append(readers, r)
	}
	served := make(chan *reserve.Reservation, 1)
	waitErr := make(chan error, 1)
	go func() {
		r, err := e.rs.Reserve(ctx, space, []string{"src/parser/lexer.go"}, reserve.WithAgent("dave"), reserve.WithTask("T-2"))
		if err != nil {
			waitErr <- err
			return
		}
		served <- r
	}()

	var v web.SpaceView
	eventually(t, "three held and one waiting", func() bool {
		v = web.SpaceView{}
		e.get("/api/v1/reservations/"+space, &v)
		return v.Held == 3 && v.Waiting == 1
	})
	rs := v.Reservations
	if v.Space != space || v.Key != reserve.Key(space) || v.HeldShared != 2 || v.Size == 0 || len(rs) != 4 ||
		rs[0].Agent != "alice" || rs[0].State != "held" || rs[0].Shared || rs[0].Fence == 0 || rs[0].Task != "T-1" || rs[0].Host != "h1" ||
		!rs[1].Shared || rs[3].Agent != "dave" || rs[3].State != "waiting" || rs[3].TTLLeftMS <= 0 {
		t.Errorf("view %+v", v)
	}
	// The name may come escaped, as the page sends it.
	var escaped web.SpaceView
	if code := e.get("/api/v1/reservations/"+url.PathEscape(space), &escaped); code != 200 || escaped.Space != space {
		t.Errorf("escaped: %d %+v", code, escaped)
	}
	var list web.Reservations
	e.get("/api/v1/reservations", &list)
	if len(list.Spaces) != 1 || list.Spaces[0].Space != space || list.Spaces[0].Held != 3 || list.Spaces[0].Waiting != 1 || list.ServerTime.IsZero() {
		t.Errorf("list %+v", list)
	}
	var ov web.Overview
	e.get("/api/v1/overview", &ov)
	if ov.Reservations == nil || ov.Reservations.Spaces != 1 || ov.Reservations.Held != 3 || ov.Reservations.Waiting != 1 {
		t.Errorf("overview reservations %+v", ov.Reservations)
	}
	eventually(t, "the wait counted in the metrics", func() bool {
		fams := scrape(t, e.http.URL+"/metrics", "")
		return fams["baton_reservation_oldest_wait_seconds"].value(map[string]string{"space": space}) > 0
	})
	fams := scrape(t, e.http.URL+"/metrics", "")
	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"baton_reservations_held", map[string]string{"space": space, "mode": "exclusive"}, 1},
		{"baton_reservations_held", map[string]string{"space": space, "mode": "shared"}, 2},
		{"baton_reservations_waiting", map[string]string{"space": space}, 1},
		{"baton_reservation_space_bytes", map[string]string{"space": space}, float64(v.Size)},
	} {
		if got := fams[m.name].value(m.labels); got != m.want && !(m.name == "baton_reservation_space_bytes" && got > 0) {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
	for {
		name, data, err := es.next()
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if name == "changes" && strings.Contains(data, `"kind":"space"`) && strings.Contains(data, `"key":"`+space+`"`) && strings.Contains(data, `"waiting":1`) {
			break
		}
	}

	// Alice releases: the waiter holds, in the same write.
	if err := alice.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var dave *reserve.Reservation
	select {
	case dave = <-served:
	case err := <-waitErr:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("the waiter was not served after the release")
	}
	eventually(t, "the waiter served, the line empty", func() bool {
		v = web.SpaceView{}
		e.get("/api/v1/reservations/"+space, &v)
		return v.Held == 3 && v.Waiting == 0 && v.OldestWaitMS == 0
	})
	if v.Reservations[2].Agent != "dave" || v.Reservations[2].Fence <= rs[0].Fence {
		t.Errorf("after the release %+v", v.Reservations)
	}
	fams = scrape(t, e.http.URL+"/metrics", "")
	if got := fams["baton_reservation_oldest_wait_seconds"].value(map[string]string{"space": space}); got != 0 {
		t.Errorf("oldest wait with none waiting = %v, want 0", got)
	}
	// Everyone releases: the record is deleted, and the space is gone.
	if err := dave.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range readers {
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the space gone", func() bool { return e.get("/api/v1/reservations/"+space, nil) == 404 })
	for {
		name, data, err := es.next()
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if name == "changes" && strings.Contains(data, `"kind":"space","key":"`+space+`","op":"delete"`) {
			break
		}
	}
	var apiErr web.APIError
	if code := e.get("/api/v1/reservations/nope", &apiErr); code != 404 || apiErr.Code != 5 {
		t.Errorf("no such space: %d %+v", code, apiErr)
	}
}

// TestReservations_ExpiryAndUndecodableRecordsAreShown: a reservation
// past its TTL shows as expired with no write to say so; a record that
// does not decode is shown, and counted, as such.
func TestReservations_ExpiryAndUndecodableRecordsAreShown(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Neither is renewed: a renewal would write the space, and drop the
	// expired one.
	long, err := e.rs.TryReserve(ctx, "app", []string{"src/**"}, reserve.WithTTL(time.Minute), reserve.WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = long.Release(context.Background()) }()
	if _, err := e.rs.TryReserve(ctx, "app", []string{"docs/**"}, reserve.WithTTL(time.Second), reserve.WithoutKeepAlive()); err != nil {
		t.Fatal(err)
	}
	var v web.SpaceView
	eventually(t, "two held", func() bool {
		v = web.SpaceView{}
		return e.get("/api/v1/reservations/app", &v) == 200 && v.Held == 2
	})
	rev := v.Revision
	eventually(t, "one expired, with no write", func() bool {
		v = web.SpaceView{}
		e.get("/api/v1/reservations/app", &v)
		return v.Held == 1 && v.Expired == 1
	})
	if v.Revision != rev || v.Reservations[1].State != "expired" || v.Reservations[1].TTLLeftMS != 0 {
		t.Errorf("view %+v (revision before %d)", v, rev)
	}

	if _, err := e.rs.Bucket().Create(ctx, reserve.KeyPrefix+"junk", []byte("{not json"), time.Minute); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the undecodable space shown", func() bool {
		v = web.SpaceView{}
		return e.get("/api/v1/reservations/junk", &v) == 200
	})
	if v.Undecodable == "" || v.Key != "resv.junk" || len(v.Reservations) != 0 {
		t.Errorf("undecodable view %+v", v)
	}
	var ov web.Overview
	e.get("/api/v1/overview", &ov)
	if ov.Reservations == nil || ov.Reservations.Spaces != 2 || ov.Reservations.Undecodable != 1 || ov.Reservations.Held != 1 {
		t.Errorf("overview reservations %+v", ov.Reservations)
	}
}
