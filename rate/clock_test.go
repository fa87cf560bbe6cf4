package rate

import (
	"testing"
	"time"
)

// The bounds of the server's clock hold for any server clock consistent
// with the reading, at any later instant, within maxDrift.
func TestClockSpan_BoundsTheServersClock(t *testing.T) {
	base := time.Now()
	sent, got := base, base.Add(300*time.Microsecond)
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	c := clockSpan{at: at, sent: sent, got: got}
	// The server stamped at somewhere in [sent, got]: its clock at local
	// instant x is at + (x - stamped) * rate, rate within maxDrift of 1.
	for _, stampedAfter := range []time.Duration{0, 150 * time.Microsecond, 300 * time.Microsecond} {
		for _, rate := range []float64{1 - maxDrift, 1, 1 + maxDrift} {
			for _, later := range []time.Duration{300 * time.Microsecond, time.Second, 10 * time.Second, time.Minute} {
				x := sent.Add(later)
				server := at.Add(time.Duration(float64(later-stampedAfter) * rate))
				if lo := c.lower(x); lo.After(server) {
					t.Errorf("stamped %v after sending, rate %v, %v later: lower %v is after the server's %v", stampedAfter, rate, later, lo, server)
				}
				if hi := c.upper(x); hi.Before(server) {
					t.Errorf("stamped %v after sending, rate %v, %v later: upper %v is before the server's %v", stampedAfter, rate, later, hi, server)
				}
			}
		}
	}
	// And they are tight: a round trip and the drift apart.
	x := sent.Add(time.Second)
	if gap := c.upper(x).Sub(c.lower(x)); gap > 300*time.Microsecond+2*time.Millisecond {
		t.Errorf("the bounds are %v apart a second after the reading", gap)
	}
}
