package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// A loop backing off after a backend failure retries at once when another
// loop of the replica sees a backend answer again, not after its full
// back-off.
func TestRetrySleepEndsWhenABackendAnswers(t *testing.T) {
	e := &Engine{log: slog.New(slog.DiscardHandler), health: map[string]error{"pacer": errors.New("redis down")}}
	const failures = 10 // the longest back-off, maxRetryDelay
	start := time.Now()
	done := make(chan time.Duration, 1)
	go func() {
		_ = e.retrySleep(context.Background(), failures)
		done <- time.Since(start)
	}()
	for { // until the sleeper listens for a recovery
		e.healthMu.Lock()
		listening := e.recovered != nil
		e.healthMu.Unlock()
		if listening {
			break
		}
		select {
		case d := <-done:
			t.Fatalf("retrySleep returned after %s without a recovery", d)
		default:
		}
	}
	e.setHealthy("pacer")
	if d := <-done; d >= e.retryDelay(failures) {
		t.Errorf("retrySleep returned after %s, want it woken by the recovery before its back-off of %s", d, e.retryDelay(failures))
	}
}

// Without a recovery, the back-off runs its course: 50ms doubling to
// maxRetryDelay.
func TestRetryDelay(t *testing.T) {
	e := &Engine{}
	for failures, want := range map[int]time.Duration{1: 50 * time.Millisecond, 2: 100 * time.Millisecond,
		3: 200 * time.Millisecond, 4: maxRetryDelay, 20: maxRetryDelay} {
		if got := e.retryDelay(failures); got != want {
			t.Errorf("retryDelay(%d) = %s, want %s", failures, got, want)
		}
	}
}
