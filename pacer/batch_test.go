package pacer

import (
	"testing"
	"time"
)

func TestBatchPolicy(t *testing.T) {
	cfg := Config{Name: "b", Rate: 1000}
	cfg.SetDefaults() // horizon 50ms, max batch 256, lateness 2ms
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		waits     int           // claims that waited for their slot, recorded first
		gap       time.Duration // between claims (0: no claims recorded)
		dropped   int
		slotLag   time.Duration // each claim comes this long after the previous claim's caller got its slot
		ask       time.Duration // each claim was asked for this long after the previous one returned (0: not recorded)
		sharers   int
		uncertain bool
		sizes     []int // successive answers to size(1, …)
	}{
		{name: "grows while nothing is wasted", sharers: 1, sizes: []int{2, 4, 8, 16, 32, 64, 128, 256, 256}},
		{name: "saturated: fair share of the horizon", waits: 10, sharers: 4, sizes: []int{2, 4, 8, 12, 12}},
		// A claim every 2ms against a slot every 1ms: the k-th slot is
		// claimed k×0.9ms late, so two fit within the 2ms lateness bound.
		{name: "light demand: what waiters can claim in time", gap: 2 * time.Millisecond, sharers: 1,
			sizes: []int{2, 2, 2}},
		// Each claim waited 2ms for a Redis round trip, but was asked for
		// 0.9ms after the last returned: at 1.2ms a claim (a third more)
		// the k-th slot from a buffer is claimed k×0.1ms late, so the
		// batch grows to twenty. By the gap alone it would be two, and
		// every claim would wait a round trip again.
		{name: "own pace, not the round trips claims waited for", gap: 2 * time.Millisecond,
			ask: 900 * time.Microsecond, sharers: 1, sizes: []int{2, 4, 8, 16, 20, 20}},
		// Asked for nearly as late as the gap (another caller's claims
		// came between): the gap decides.
		{name: "the gap when it is less", gap: 2 * time.Millisecond, ask: 1600 * time.Microsecond,
			sharers: 1, sizes: []int{2, 2}},
		// Its claims wait for their slots (a cap binds), so it comes back
		// at once, but not soon enough after its slots to count as
		// saturated (late wakings on a loaded host): the gap decides.
		{name: "claims that wait for their slots: the gap", waits: 10, gap: 2 * time.Millisecond,
			slotLag: 1500 * time.Microsecond, ask: 100 * time.Microsecond, sharers: 4, sizes: []int{2, 2}},
		{name: "uncertain clock: one slot at a time", sharers: 1, uncertain: true, sizes: []int{1, 1, 1}},
		{name: "waste halves", sharers: 1, dropped: 5, sizes: []int{1, 2, 4}},
		// Waits for its slots, but claims each 50ms after the last (one
		// request in flight, a slow provider): one slot at a time, not a
		// fair share to waste.
		{name: "waiting yet slow to come back is not saturated", waits: 10, gap: 50 * time.Millisecond,
			slotLag: 45 * time.Millisecond, sharers: 4, sizes: []int{1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBatchPolicy(cfg)
			b.noteInterval(time.Millisecond)
			for range tt.waits {
				b.noteWait(true)
			}
			if tt.gap > 0 {
				for i := range 20 {
					now := t0.Add(time.Duration(i) * tt.gap)
					b.noteClaim(now)
					b.noteReturn(now.Add(tt.gap - tt.slotLag))
					if tt.ask > 0 {
						b.noteAsk(tt.ask)
					}
				}
			}
			b.noteDropped(tt.dropped)
			for i, want := range tt.sizes {
				if got := b.size(1, tt.sharers, tt.uncertain); got != want {
					t.Fatalf("size #%d: got %d, want %d", i, got, want)
				}
			}
		})
	}
}

// A replica asks with a stride only where it pays: claims steady, a few
// intervals apart and well within the lateness bound of each other.
func TestBatchPolicyStride(t *testing.T) {
	cfg := Config{Name: "b", Rate: 20000}
	cfg.SetDefaults() // horizon 50ms, max batch 256, lateness 2ms
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		interval time.Duration
		gap      time.Duration // between claims
		waits    int           // claims that waited, each right after the previous claim's caller got its slot
		need     int
		sharers  int
		stride   time.Duration // 0: none
		n        int
	}{
		// 1,250 claims/s under a cap of 20,000: slots 600µs apart, as many
		// as 50ms holds, up to 64.
		{name: "steady demand under the cap", interval: 50 * time.Microsecond, gap: 800 * time.Microsecond,
			need: 1, sharers: 4, stride: 600 * time.Microsecond, n: 64},
		// Eight replicas claiming as often would use 8/16 of the slots.
		{name: "as many sharers as half the schedule", interval: 50 * time.Microsecond, gap: 800 * time.Microsecond,
			need: 1, sharers: 8, stride: 600 * time.Microsecond, n: 64},
		{name: "schedule more than half used", interval: 50 * time.Microsecond, gap: 800 * time.Microsecond,
			need: 1, sharers: 9},
		{name: "several jobs waiting", interval: 50 * time.Microsecond, gap: 800 * time.Microsecond, need: 3},
		{name: "saturated", interval: 50 * time.Microsecond, gap: 50 * time.Microsecond, waits: 10, need: 1},
		// Claims 200µs apart: a batch one interval apart serves ten before
		// its lateness bound.
		{name: "claims close together", interval: 10 * time.Microsecond, gap: 200 * time.Microsecond, need: 1},
		// 300 steps per slot: too many gaps for what a stride saves.
		{name: "cap far above demand", interval: time.Microsecond, gap: 400 * time.Microsecond, need: 1},
		{name: "stride under two intervals", interval: 400 * time.Microsecond, gap: 800 * time.Microsecond, need: 1},
		// 5ms between claims: a slot 3.75ms ahead would make the job wait
		// longer than a call takes.
		{name: "demand too light", interval: 200 * time.Microsecond, gap: 5 * time.Millisecond, need: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBatchPolicy(cfg)
			b.noteInterval(tt.interval)
			for i := range 20 {
				now := t0.Add(time.Duration(i) * tt.gap)
				b.noteClaim(now)
				if i < tt.waits {
					b.noteWait(true)
				}
				lag := tt.gap / 2
				if tt.waits > 0 {
					lag = 0
				}
				b.noteReturn(now.Add(tt.gap - lag))
			}
			stride, n := b.stride(tt.need, tt.sharers)
			if stride != tt.stride || n != tt.n {
				t.Errorf("stride %s × %d, want %s × %d", stride, n, tt.stride, tt.n)
			}
		})
	}
}
