package lease

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/kv/kvtest"
)

// A transfer request written while the holder renews is not lost: the
// renewal's CAS conflicts, follows the request's revision, and passes the
// request on to Changes.
func TestModify_PassesOnATransferRequestItRunsInto(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t)
	c := kvtest.Connect(t, s.ClientURL())
	ls, err := New(c, WithInstance("holder"), WithHostID("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Ensure(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l, err := ls.TryAcquire(ctx, "job", WithTTL(30*time.Second), WithoutKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	// Another process asks for a transfer at the revision the holder knows.
	req := l.Record()
	req.TransferTo = "successor"
	data, _ := encode(req)
	if _, err := ls.bucket.Update(ctx, "job", data, 30*time.Second, l.Revision()); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-l.Changes():
		if r.TransferTo != "successor" {
			t.Errorf("change %+v, want the transfer request", r)
		}
	default:
		t.Fatal("the transfer request the renewal ran into was lost")
	}
	if got := l.Record(); got.TransferTo != "successor" || got.Renewals != 1 {
		t.Errorf("record after the renewal %+v: the request must be kept", got)
	}
}
