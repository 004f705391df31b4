package dispatch

import (
	"testing"
	"time"
)

func TestLaneTarget(t *testing.T) {
	cfg := Config{RateHint: 300, Lookahead: 500 * time.Millisecond, MaxLaneBuffer: 64}
	tests := []struct {
		lowest   bool
		replicas int
		sendRate float64
		want     int
	}{
		{lowest: true, replicas: 4, sendRate: 0, want: 38},    // 300/4 × 0.5s + 1
		{lowest: true, replicas: 4, sendRate: 20, want: 11},   // one in flight, 50ms answers: 20/s × 0.5s + 1
		{lowest: true, replicas: 4, sendRate: 5000, want: 38}, // room to spare: its share
		{lowest: true, replicas: 1, sendRate: 0, want: 64},    // capped by MaxLaneBuffer
		{lowest: false, replicas: 4, sendRate: 20, want: 2},   // two chunks of 10ms of its share
	}
	for _, tt := range tests {
		if got := cfg.laneTarget(tt.lowest, tt.replicas, tt.sendRate); got != tt.want {
			t.Errorf("laneTarget(lowest %v, replicas %d, sendRate %v): got %d, want %d", tt.lowest, tt.replicas, tt.sendRate, got, tt.want)
		}
	}
}
