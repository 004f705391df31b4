package pacer

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// steppingClock is a replica's clock (true time), apart from Redis's TIME;
// each reading advances it by tick (a round trip's worth).
type steppingClock struct {
	mu   sync.Mutex
	now  time.Time
	tick time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	c.now = c.now.Add(c.tick)
	return t
}

func (c *steppingClock) set(t time.Time, tick time.Duration) {
	c.mu.Lock()
	c.now, c.tick = t, tick
	c.mu.Unlock()
}

func stepPacer(t *testing.T, m *miniredis.Miniredis, clk Clock) *Pacer {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	p, err := New(rdb, Config{Name: "step", Rate: 1000, Horizon: 20 * ms, Headroom: -1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// locals maps a reservation's slots to p's clock, as addSlots does.
func locals(p *Pacer, r Reservation) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]time.Time, r.Granted)
	for i := range out {
		out[i] = p.clock.local(r.Slot(i))
	}
	return out
}

func minGap(ts []time.Time) time.Duration {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	g := time.Duration(math.MaxInt64)
	for i := 1; i < len(ts); i++ {
		g = min(g, ts[i].Sub(ts[i-1]))
	}
	return g
}

// The Redis clock steps forward by 30ms (a failover to a primary whose
// clock runs ahead, or an NTP step on the Redis host) while A holds slots
// one horizon ahead. B notices the step and re-maps; the schedule does not.
func TestRedisClockStepForwardRestartsTheSchedule(t *testing.T) {
	m := miniredis.RunT(t)
	m.SetTime(t0)
	m.HSet(key("step"), "tat", "1", "last_now", "1")
	clk := &steppingClock{now: t0}
	a, b := stepPacer(t, m, clk), stepPacer(t, m, clk)
	ctx := context.Background()

	rb, err := b.Reserve(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := a.Reserve(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	all := append(locals(b, rb), locals(a, ra)...)

	clk.set(t0.Add(1*ms), 0)
	m.SetTime(t0.Add(31 * ms)) // Redis clock now 30ms ahead of true time
	rb2, err := b.Reserve(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	if rb2.Granted != 0 {
		t.Errorf("the reply that showed the step granted %d slots, want them given up", rb2.Granted)
	}
	// Later, B asks again: the schedule restarted one horizon after the
	// step, past every slot A holds.
	clk.set(t0.Add(21*ms), 0)
	m.SetTime(t0.Add(51 * ms))
	rb3, err := b.Reserve(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	if rb3.Granted == 0 {
		t.Fatalf("after the restart B got nothing (retry after %s), want slots", rb3.RetryAfter)
	}
	all = append(all, locals(b, rb2)...)
	all = append(all, locals(b, rb3)...)
	if g := minGap(all); g < ms {
		t.Errorf("slots %s apart on the replicas' clocks (interval 1ms): A held %d, B got %d more from %s",
			g, ra.Granted, rb3.Granted, locals(b, rb3)[0].Sub(t0))
	}
}
