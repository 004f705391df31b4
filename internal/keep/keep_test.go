package keep

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Tasks sent to a kept goroutine run on it, one after another; with none
// waiting, Hand says so and gives nothing away (Hand to a waiting one is
// exercised by the pacer's and the engine's tests, which count the
// goroutines started).
func TestHandToTheKeptGoroutine(t *testing.T) {
	ch := make(chan int)
	if Hand(ch, 0) {
		t.Fatal("Hand took a task with no goroutine waiting")
	}
	ran := make(chan int)
	stop := make(chan struct{})
	ended := make(chan struct{})
	go func() { defer close(ended); Loop(1, ch, time.Minute, stop, func(n int) { ran <- n }) }()
	if got := <-ran; got != 1 {
		t.Fatalf("first task %d, want 1", got)
	}
	for n := 2; n <= 4; n++ {
		ch <- n // taken once run has returned and the loop waits again
		if got := <-ran; got != n {
			t.Fatalf("task %d ran as %d", n, got)
		}
	}
	close(stop)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("Loop did not end within 10s of stop")
	}
}

// A kept goroutine with nothing to do ends after idle.
func TestLoopEndsWhenIdle(t *testing.T) {
	ended := make(chan struct{})
	runs := 0
	go func() { defer close(ended); Loop(0, make(chan int), time.Millisecond, nil, func(int) { runs++ }) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("Loop did not end within 10s with nothing to do")
	}
	if runs != 1 {
		t.Errorf("%d runs, want 1", runs)
	}
}
