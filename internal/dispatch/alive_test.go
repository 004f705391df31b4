package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// A job whose request stays open longer than the visibility timeout is
// extended while it is open, and leaves the set of open requests once it
// is settled.
func TestKeepAliveExtendsOpenRequests(t *testing.T) {
	release := make(chan struct{})
	s := sink.SenderFunc(func(ctx context.Context, j *queue.Job) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	// 300ms: extended every 100ms, checked every 25ms.
	h := start(t, Config{VisibilityTimeout: 300 * time.Millisecond}, twoLanes, &gatePacer{}, s)
	h.q.Enqueue(context.Background(), job("slow", "default", "x"))
	eventually(t, 5*time.Second, "the request open", func() bool { return h.e.open.Load() == 1 })
	// Three extensions take at least 200ms (one at the first round, then
	// one per 100ms): the request outlived most of the visibility timeout.
	eventually(t, 10*time.Second, "the open request extended 3 times", func() bool { return h.q.extended("slow") >= 3 })
	close(release)
	eventually(t, 5*time.Second, "the job acked", func() bool { return h.q.settledCount() == 1 })
	eventually(t, 5*time.Second, "the set of open requests empty", func() bool { return h.e.sending.len() == 0 })
	if got := h.q.outcomes()["slow"].how; got != "ack" {
		t.Errorf("slow job settled by %q, want ack", got)
	}
}

// While the engine shuts down, requests still open are kept alive until
// they are settled.
func TestKeepAliveDuringShutdown(t *testing.T) {
	release := make(chan struct{})
	s := sink.SenderFunc(func(ctx context.Context, j *queue.Job) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	h := start(t, Config{VisibilityTimeout: 300 * time.Millisecond, ShutdownTimeout: 20 * time.Second}, twoLanes, &gatePacer{}, s)
	h.q.Enqueue(context.Background(), job("slow", "default", "x"))
	eventually(t, 5*time.Second, "the request open", func() bool { return h.e.open.Load() == 1 })
	h.cancel()
	h.cancel = nil
	before := h.q.extended("slow")
	eventually(t, 10*time.Second, "the open request extended twice after shutdown began",
		func() bool { return h.q.extended("slow") >= before+2 })
	close(release)
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20s of the request's answer")
	}
	if got := h.q.outcomes()["slow"].how; got != "ack" {
		t.Errorf("slow job settled by %q, want ack", got)
	}
}
