package mockprovider

import (
	"testing"
	"time"
)

// A capacity accepts at most that many requests in any sliding second,
// counting only those accepted, and changes while the provider runs.
func TestCapacity(t *testing.T) {
	g := &capacityGate{rate: 3}
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for i, c := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {100 * ms, true}, {200 * ms, true}, {300 * ms, false}, {999 * ms, false},
		{1000 * ms, true}, {1050 * ms, false}, {1100 * ms, true}, {1200 * ms, true}, {1250 * ms, false}} {
		if got := g.admit(t0.Add(c.at)); got != c.want {
			t.Errorf("request %d at +%s: admitted %v, want %v", i, c.at, got, c.want)
		}
	}
	g.set(0)
	if !g.admit(t0.Add(1300 * ms)) {
		t.Error("capacity 0: refused, want no limit")
	}
}
