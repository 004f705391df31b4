package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// A loop backing off after a backend failure retries at once when another
// loop of the replica sees a backend answer again, not after its full
// back-off.
func TestRetrySleepEndsWhenABackendAnswers(t *testing.T) {
	e := &Engine{log: slog.New(slog.DiscardHandler), health: map[string]error{"pacer": errors.New("redis down")}}
	const failures = 10 // the longest back-off, maxRetryDelay
	start := time.Now()
	done := make(chan time.Duration, 1)
	b := &backoff{failures: failures - 1}
	go func() {
		_ = e.retrySleep(context.Background(), b)
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
	if !b.woken || b.failures != failures {
		t.Errorf("after the wake: %+v, want woken, %d failures", *b, failures)
	}

	// The loop fails again: this wait does not listen for recoveries (one
	// elsewhere said nothing of this loop's failure), so it runs its course.
	e.healthMu.Lock()
	e.health["pacer"] = errors.New("still down")
	e.healthMu.Unlock()
	start = time.Now()
	if err := e.retrySleep(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < e.retryDelay(failures) {
		t.Errorf("the wait after a wake returned after %s, want its whole back-off of %s", d, e.retryDelay(failures))
	}
	e.healthMu.Lock()
	listened := e.recovered != nil
	e.healthMu.Unlock()
	if listened || b.woken {
		t.Errorf("the wait after a wake listened for a recovery (%v) or counts as woken (%v)", listened, b.woken)
	}
	b.ok()
	if *b != (backoff{}) {
		t.Errorf("after ok: %+v, want zero", *b)
	}
}

// failLane is a memQueue whose Fetch of one lane always fails (its stream
// or consumer gone, say), while the others answer.
type failLane struct {
	*memQueue
	bad             string
	badCalls, other atomic.Int64
}

func (q *failLane) Fetch(ctx context.Context, lane string, n int) ([]queue.Delivery, error) {
	if lane == q.bad {
		q.badCalls.Add(1)
		return nil, errors.New("NOGROUP no such consumer group")
	}
	q.other.Add(1)
	return q.memQueue.Fetch(ctx, lane, n)
}

// A lane whose fetch fails on every call backs off while another lane
// fetches: each of the other lane's answers cleared the queue's error and
// woke it to fail again (76,680 fetches of the failing lane in a second).
// Now at most every other wait can be cut short, so it fetches at most
// about twice per longest back-off.
func TestFailingLaneBacksOffWhileAnotherFetches(t *testing.T) {
	q := &failLane{memQueue: newMemQueue("vip", "default"), bad: "vip"}
	for i := range 200000 {
		q.Enqueue(context.Background(), job(fmt.Sprint("d", i), "default", "x"))
	}
	e, err := New(Config{}, Deps{Queue: q, Pacer: &gatePacer{}, Priority: twoLanes,
		Sink: sink.SenderFunc(func(context.Context, *queue.Job) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- e.Run(ctx) }()
	const fetches = 20000
	poll.Until(t, 60*time.Second, time.Millisecond, fmt.Sprintf("%d fetches of the default lane", fetches),
		func() bool { return q.other.Load() >= fetches })
	elapsed, bad := time.Since(start), q.badCalls.Load()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// 50, 100, 200ms, then at most two fetches per 250ms; half again as
	// many for slack.
	bound := 4 + int64(3*elapsed/maxRetryDelay)
	t.Logf("in %s: %d fetches of the default lane, %d of the failing one (bound %d)", elapsed.Round(time.Millisecond), q.other.Load(), bad, bound)
	if bad > bound {
		t.Errorf("the failing lane fetched %d times in %s while the other fetched %d, want at most %d",
			bad, elapsed.Round(time.Millisecond), q.other.Load(), bound)
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
