package pacer

import (
	"testing"
	"time"
)

// A replica refused by a full schedule asks again after RetryAfter plus a
// random share of the other replicas' turns, never more than half a
// horizon, and at once when it is alone or the schedule is paused.
func TestSpreadOfRefusedAsks(t *testing.T) {
	p, _ := newTimeline(t, Config{Name: "spread", Rate: 500})
	r := Reservation{Interval: 2 * time.Millisecond}
	for _, tc := range []struct {
		sharers int64
		bound   time.Duration
	}{
		{1, 0},
		{4, 6 * time.Millisecond},   // three others, one interval each
		{64, 25 * time.Millisecond}, // 63 intervals, capped at half the 50ms horizon
	} {
		p.sharers.Store(tc.sharers)
		var most time.Duration
		for range 1000 {
			d := p.spread(r)
			if d < 0 || d > tc.bound {
				t.Fatalf("%d sharers: spread %s, want within [0, %s]", tc.sharers, d, tc.bound)
			}
			most = max(most, d)
		}
		if most < tc.bound/2 {
			t.Errorf("%d sharers: the longest of 1000 spreads is %s, want the draws to cover [0, %s]", tc.sharers, most, tc.bound)
		}
	}
	p.sharers.Store(64)
	if d := p.spread(Reservation{Interval: 2 * time.Millisecond, Paused: true}); d != 0 {
		t.Errorf("paused: spread %s, want 0 (RetryAfter is the resume)", d)
	}
}
