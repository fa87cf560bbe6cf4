package reserve

import (
	"testing"
	"time"
)

// A reservation counts as held only until its local deadline: its last
// renewal's send, plus the TTL less the clock margin and the stop budget.
func TestReservation_LiveUntilItsLocalDeadline(t *testing.T) {
	now := time.Now()
	r := &Reservation{ttl: 3 * time.Second, budget: 750 * time.Millisecond, done: make(chan struct{}), lastSent: now}
	if !r.live() {
		t.Fatal("just renewed: not live")
	}
	r.lastSent = now.Add(-1900 * time.Millisecond) // 3s - 0.3s margin - 0.75s budget = 1.95s
	if !r.live() {
		t.Fatal("1.9s after its renewal, with 1.95s to its deadline: not live")
	}
	r.lastSent = now.Add(-2 * time.Second)
	if r.live() {
		t.Fatal("past its local deadline: live")
	}
	r.lastSent = now
	close(r.done)
	if r.live() {
		t.Fatal("ended: live")
	}
}
