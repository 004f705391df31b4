package queue

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A dedup window under a millisecond cannot be kept by Redis (SET ... PX
// counts whole ms, and PX 0 is an error): Validate refuses it, naming the
// key; zero (the default) and 1ms pass.
func TestValidateDedupWindow(t *testing.T) {
	for _, tc := range []struct {
		window time.Duration
		ok     bool
	}{
		{0, true},
		{time.Millisecond, true},
		{10 * time.Minute, true},
		{500 * time.Microsecond, false},
		{time.Nanosecond, false},
		{-time.Second, false},
	} {
		cfg := Config{Name: "q", Lanes: []string{"l"}, DedupWindow: tc.window}
		err := cfg.Validate()
		if tc.ok {
			if err != nil {
				t.Errorf("dedup_window %s: got %v, want nil", tc.window, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "queue.dedup_window") {
			t.Errorf("dedup_window %s: got %v, want ErrInvalidConfig naming queue.dedup_window", tc.window, err)
		}
	}
}
