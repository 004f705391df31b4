package queuetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// listDead lists up to limit dead letters, failing the test on error.
func listDead(t *testing.T, q queue.Queue, limit int) []queue.DeadLetter {
	t.Helper()
	dead, err := q.ListDead(t.Context(), limit)
	if err != nil {
		t.Fatalf("ListDead(%d): %v", limit, err)
	}
	return dead
}

// deadIDs returns the job ids of dead letters, in order.
func deadIDs(dead []queue.DeadLetter) []string {
	ids := make([]string, len(dead))
	for i, d := range dead {
		ids[i] = d.Job.ID
	}
	return ids
}

// waitDeadLetters waits until Stats counts n dead letters.
func waitDeadLetters(t *testing.T, q queue.Queue, n int64) {
	t.Helper()
	waitFor(t, "dead letter count", func() string {
		_, st := laneStats(t, q, laneLow)
		if st.DeadLetters != n {
			return fmt.Sprintf("got %d, want %d", st.DeadLetters, n)
		}
		return ""
	})
}

// testMaxAttemptsByRetry: Retry on the last attempt dead-letters the job
// with its reason; Requeue brings it back with its attempts reset.
func testMaxAttemptsByRetry(t *testing.T, h *harness) {
	q := h.open() // MaxAttempts 3
	id := enqueue(t, q, newJob(laneLow, 1))[0].ID
	started := time.Now()
	for attempt := 1; attempt <= 3; attempt++ {
		d := fetchOne(t, q, laneLow)
		if got := d.Job().Attempt; got != attempt {
			t.Fatalf("got attempt %d, want %d", got, attempt)
		}
		dead, err := d.Retry(t.Context(), 0, fmt.Sprintf("failure %d", attempt))
		if err != nil || dead != (attempt == 3) {
			t.Fatalf("Retry on attempt %d of 3: got dead_lettered=%v err=%v, want %v, nil", attempt, dead, err, attempt == 3)
		}
	}
	expectNone(t, q, laneLow, quiet)
	dead := listDead(t, q, 10)
	if len(dead) != 1 || dead[0].Job.ID != id {
		t.Fatalf("ListDead: got %v, want [%s]", deadIDs(dead), id)
	}
	dl := dead[0]
	if !strings.Contains(dl.Reason, "failure 3") || !strings.Contains(dl.Job.LastError, "failure 3") {
		t.Errorf("dead letter: got reason=%q last_error=%q, want both to contain %q", dl.Reason, dl.Job.LastError, "failure 3")
	}
	if dl.At.Before(started.Add(-time.Minute)) || dl.At.After(time.Now().Add(time.Minute)) {
		t.Errorf("dead letter: got at=%v, want about now", dl.At)
	}
	waitDeadLetters(t, q, 1)

	n, err := q.Requeue(t.Context(), id)
	if n != 1 || err != nil {
		t.Fatalf("Requeue(%s): got %d, %v, want 1, nil", id, n, err)
	}
	if dead := listDead(t, q, 10); len(dead) != 0 {
		t.Errorf("ListDead after Requeue: got %v, want none", deadIDs(dead))
	}
	waitDeadLetters(t, q, 0)
	d := fetchOne(t, q, laneLow)
	if j := d.Job(); j.ID != id || j.Attempt != 1 || payloadN(t, j) != 1 {
		t.Errorf("requeued job: got id=%q attempt=%d, want %q, 1", j.ID, j.Attempt, id)
	}
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack of the requeued job: %v", err)
	}
	if n, err := q.Requeue(t.Context(), "no-such-job"); n != 0 || !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Requeue of an unknown id: got %d, %v, want 0, ErrNotFound", n, err)
	}
}

// testMaxAttemptsByTimeout: a job whose visibility timeout expires on every
// attempt is dead-lettered by the queue instead of being delivered once more.
func testMaxAttemptsByTimeout(t *testing.T, h *harness) {
	q := h.openWith(func(c *queue.Config) { c.MaxAttempts = 2 })
	id := enqueue(t, q, newJob(laneLow, 1))[0].ID
	var held []queue.Delivery
	for attempt := 1; attempt <= 2; attempt++ {
		d := fetchOne(t, q, laneLow) // and never settled
		if got := d.Job().Attempt; got != attempt {
			t.Fatalf("got attempt %d, want %d", got, attempt)
		}
		held = append(held, d)
	}
	// The first delivery timed out and the job went to the same consumer
	// again: the stale delivery cannot settle it any more.
	if !h.feat.StaleSettleUndetected {
		if err := held[0].Ack(t.Context()); !errors.Is(err, queue.ErrSettled) {
			t.Errorf("Ack of a timed-out delivery redelivered to the same consumer: got %v, want ErrSettled", err)
		}
	}
	var dl queue.DeadLetter
	waitFor(t, "dead letter after the last visibility timeout", func() string {
		ctx, cancel := context.WithTimeout(t.Context(), quiet)
		defer cancel()
		ds, err := q.Fetch(ctx, laneLow, 1)
		if len(ds) > 0 {
			t.Fatalf("job delivered for attempt %d with MaxAttempts 2", ds[0].Job().Attempt)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Fetch: %v", err)
		}
		dead := listDead(t, q, 10)
		if len(dead) != 1 || dead[0].Job.ID != id {
			return fmt.Sprintf("ListDead: got %v, want [%s]", deadIDs(dead), id)
		}
		dl = dead[0]
		return ""
	})
	if dl.Reason == "" {
		t.Errorf("dead letter after timeouts has no reason")
	}
	waitCounts(t, q, laneLow, 0, 0, 0)
	waitDeadLetters(t, q, 1)
	if !h.feat.StaleSettleUndetected {
		if err := held[1].Ack(t.Context()); !errors.Is(err, queue.ErrSettled) {
			t.Errorf("Ack of the timed-out last attempt: got %v, want ErrSettled", err)
		}
	}
}

// testDeadLetterAndRequeueAll: dead letters list oldest first, honour the
// limit, and Requeue with no ids brings them all back; an unknown id among
// known ones is reported after the others are requeued.
func testDeadLetterAndRequeueAll(t *testing.T, h *harness) {
	q := h.open()
	var ids []string
	for _, r := range enqueue(t, q, newJob(laneLow, 0), newJob(laneLow, 1), newJob(laneLow, 2)) {
		ids = append(ids, r.ID)
	}
	for i, d := range fetchN(t, q, laneLow, 3) {
		if err := d.DeadLetter(t.Context(), fmt.Sprintf("rejected %d", i)); err != nil {
			t.Fatalf("DeadLetter: %v", err)
		}
	}
	dead := listDead(t, q, 10)
	if got := deadIDs(dead); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("ListDead: got %v, want %v (oldest first)", got, ids)
	}
	for i, dl := range dead {
		if want := fmt.Sprintf("rejected %d", i); dl.Reason != want || dl.Job.LastError != want {
			t.Errorf("dead letter %d: got reason=%q last_error=%q, want %q", i, dl.Reason, dl.Job.LastError, want)
		}
	}
	if got := deadIDs(listDead(t, q, 2)); fmt.Sprint(got) != fmt.Sprint(ids[:2]) {
		t.Errorf("ListDead(2): got %v, want %v", got, ids[:2])
	}
	waitDeadLetters(t, q, 3)

	n, err := q.Requeue(t.Context(), ids[1], "no-such-job")
	if n != 1 || !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("Requeue(known, unknown): got %d, %v, want 1, ErrNotFound", n, err)
	}
	if got := deadIDs(listDead(t, q, 10)); fmt.Sprint(got) != fmt.Sprint([]string{ids[0], ids[2]}) {
		t.Errorf("ListDead after Requeue of %s: got %v", ids[1], got)
	}
	if n, err := q.Requeue(t.Context()); n != 2 || err != nil {
		t.Errorf("Requeue(): got %d, %v, want 2, nil", n, err)
	}
	if dead := listDead(t, q, 10); len(dead) != 0 {
		t.Errorf("ListDead after Requeue(): got %v, want none", deadIDs(dead))
	}
	seen := map[string]bool{}
	for _, d := range fetchN(t, q, laneLow, 3) {
		if d.Job().Attempt != 1 {
			t.Errorf("requeued job %s: got attempt %d, want 1", d.Job().ID, d.Job().Attempt)
		}
		seen[d.Job().ID] = true
		if err := d.Ack(t.Context()); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
	if len(seen) != 3 {
		t.Errorf("requeued jobs: got %d distinct ids, want 3", len(seen))
	}
	waitDeadLetters(t, q, 0)
}
