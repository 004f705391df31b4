package pacer

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
)

// Background top-ups at the uncapped ceiling run one after another on one
// goroutine, not a new one each: a goroutine started per top-up grew its
// stack through the Redis client every time.
func TestTopUpsShareAGoroutine(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	p := newClientPacer(t, srv, Config{Name: "topup", Rate: 1e6, Burst: 1000}) // as make bench's ceiling
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for range 3000 {
		if _, err := p.Take(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// 100µs of work per slot, spun rather than slept, as in
		// TestBatchingAtOwnPaceBehindASlowLink.
		for start := time.Now(); time.Since(start) < 100*time.Microsecond; {
		}
	}
	runs, loops := p.topUpRuns.Load(), p.topUpLoops.Load()
	t.Logf("%d top-ups on %d goroutines", runs, loops)
	if runs < 20 {
		t.Fatalf("%d top-ups, want at least 20 for the test to mean anything", runs)
	}
	// A goroutine ends after topUpIdle without a top-up; on a loaded host
	// a stall may outlast it now and then.
	if loops > runs/10 {
		t.Errorf("%d top-ups started %d goroutines, want at most a tenth as many", runs, loops)
	}
}
