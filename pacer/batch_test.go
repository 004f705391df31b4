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
		slotLag   time.Duration // each claim comes this long after the previous slot
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
					b.noteSlot(now.Add(tt.gap - tt.slotLag))
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
