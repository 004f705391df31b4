package redisq_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

// A delayed job that has fallen due but that no Fetch has moved into its
// lane yet (no dispatcher fetches the lane) is waiting: Cancel removes it
// from the due-later set, and no Fetch ever gets it.
func TestCancelDueDelayedJob(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	q := open(t, srv, queue.Config{Name: "cancel-due", Lanes: []string{"vip", "default"}})
	job := &queue.Job{ID: "due-1", Lane: "default", NotBefore: time.Now().Add(time.Second),
		Payload: json.RawMessage(`1`)}
	if _, err := q.Enqueue(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	if l, err := q.Locate(t.Context(), "due-1"); err != nil || l.State != queue.StateDelayed {
		t.Fatalf("Locate before due: got %s, %v; want delayed", l.State, err)
	}
	poll.Until(t, 5*time.Second, 10*time.Millisecond, "due", func() bool {
		l, err := q.Locate(t.Context(), "due-1")
		if err != nil {
			t.Fatalf("Locate: %v", err)
		}
		return l.State == queue.StateWaiting
	})

	st, err := q.Cancel(t.Context(), "due-1")
	if err != nil || st != queue.StateWaiting {
		t.Fatalf("Cancel: got %s, %v; want waiting, nil", st, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	ds, err := q.Fetch(ctx, "default", 10)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch: %v", err)
	}
	for _, d := range ds {
		t.Errorf("Fetch after Cancel: got job %s, want none", d.Job().ID)
	}
	if l, err := q.Locate(t.Context(), "due-1"); err != nil || l.State != queue.StateUnknown {
		t.Errorf("Locate after Cancel: got %s, %v; want not found", l.State, err)
	}
	if _, err := q.Cancel(t.Context(), "due-1"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Cancel again: got %v, want ErrNotFound", err)
	}
}
