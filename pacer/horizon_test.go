package pacer

import (
	"testing"
	"time"
)

// A horizon is short when it holds fewer slots than there are replicas
// asking; the horizon to set instead gives each of them two.
func TestHorizonForManyReplicas(t *testing.T) {
	for _, tc := range []struct {
		rate     float64
		replicas int
		horizon  time.Duration
		short    bool
		want     time.Duration
	}{
		{500, 4, 50 * time.Millisecond, false, 50 * time.Millisecond},   // 25 slots for 4
		{500, 25, 50 * time.Millisecond, false, 100 * time.Millisecond}, // 25 slots for 25
		{500, 26, 50 * time.Millisecond, true, 110 * time.Millisecond},  // 104ms, rounded up
		{500, 64, 50 * time.Millisecond, true, 260 * time.Millisecond},  // 256ms
		{500, 64, 250 * time.Millisecond, false, 260 * time.Millisecond},
		{300, 16, 50 * time.Millisecond, true, 110 * time.Millisecond}, // 15 slots for 16
		{10000, 64, 50 * time.Millisecond, false, 50 * time.Millisecond},
		{0, 64, 50 * time.Millisecond, false, 50 * time.Millisecond},
		{10, 1, 50 * time.Millisecond, false, 200 * time.Millisecond}, // alone: nobody to share with
		{10, 2, 50 * time.Millisecond, true, 400 * time.Millisecond},
		{1, 10, 50 * time.Millisecond, true, MaxHorizon}, // 20s would fail Validate
	} {
		if got := ShortHorizon(tc.rate, tc.horizon, tc.replicas); got != tc.short {
			t.Errorf("ShortHorizon(%g/s, %s, %d replicas) = %v, want %v", tc.rate, tc.horizon, tc.replicas, got, tc.short)
		}
		if got := HorizonFor(tc.rate, tc.replicas); got != tc.want {
			t.Errorf("HorizonFor(%g/s, %d replicas) = %s, want %s", tc.rate, tc.replicas, got, tc.want)
		}
	}
}
