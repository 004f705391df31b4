package queuetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// testSettleTwice: a delivery settles once; any later Ack, Retry,
// DeadLetter or Extend returns ErrSettled and changes nothing.
func testSettleTwice(t *testing.T, h *harness) {
	q := h.open()
	enqueue(t, q, newJob(laneLow, 0), newJob(laneLow, 1), newJob(laneLow, 2))
	ds := fetchN(t, q, laneLow, 3)
	ctx := t.Context()
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if _, err := ds[1].Retry(ctx, time.Hour, "later"); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if err := ds[2].DeadLetter(ctx, "rejected"); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	for i, d := range ds {
		settle := map[string]error{
			"Ack":        d.Ack(ctx),
			"DeadLetter": d.DeadLetter(ctx, "again"),
			"Extend":     d.Extend(ctx),
		}
		_, settle["Retry"] = d.Retry(ctx, 0, "again")
		for op, err := range settle {
			if !errors.Is(err, queue.ErrSettled) {
				t.Errorf("delivery %d settled, then %s: got %v, want ErrSettled", i, op, err)
			}
		}
	}
	// Nothing was stored twice: one delayed job, one dead letter.
	waitCounts(t, q, laneLow, 0, 1, 0)
	if dead := listDead(t, q, 10); len(dead) != 1 || dead[0].Job.ID != ds[2].Job().ID || dead[0].Reason != "rejected" {
		t.Errorf("ListDead: got %+v, want only %s, rejected", dead, ds[2].Job().ID)
	}
}

// testStats: Stats counts ready, delayed, in-flight and dead jobs per lane,
// in lane order, and the age of the oldest ready job.
func testStats(t *testing.T, h *harness) {
	q := h.open()
	st, err := q.Stats(t.Context())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if len(st.Lanes) != 2 || st.Lanes[0].Lane != laneHigh || st.Lanes[1].Lane != laneLow {
		t.Fatalf("Stats lanes: got %+v, want %s then %s", st.Lanes, laneHigh, laneLow)
	}
	for _, ls := range st.Lanes {
		if ls != (queue.LaneStats{Lane: ls.Lane}) {
			t.Errorf("empty lane: got %+v, want zero counts", ls)
		}
	}
	later := newJob(laneLow, 3)
	later.NotBefore = time.Now().Add(time.Hour)
	enqueue(t, q, newJob(laneHigh, 0), newJob(laneLow, 1), newJob(laneLow, 2), later)
	waitCounts(t, q, laneHigh, 1, 0, 0)
	waitCounts(t, q, laneLow, 2, 1, 0)
	waitFor(t, "age of the oldest ready job", func() string {
		if ls, _ := laneStats(t, q, laneLow); ls.OldestAge <= 0 || ls.OldestAge > time.Hour {
			return fmt.Sprintf("got %s, want above zero", ls.OldestAge)
		}
		return ""
	})
	d := fetchOne(t, q, laneLow)
	waitCounts(t, q, laneLow, 1, 1, 1)
	if err := d.DeadLetter(t.Context(), "rejected"); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	waitCounts(t, q, laneLow, 1, 1, 0)
	waitDeadLetters(t, q, 1)
	d = fetchOne(t, q, laneHigh)
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	waitFor(t, "stats of the emptied lane", func() string {
		if ls, _ := laneStats(t, q, laneHigh); ls != (queue.LaneStats{Lane: laneHigh}) {
			return fmt.Sprintf("got %+v, want zero counts and age", ls)
		}
		return ""
	})
}

// testUnknownLane: Fetch of a lane the queue does not have fails at once.
func testUnknownLane(t *testing.T, h *harness) {
	q := h.open()
	ctx, cancel := context.WithTimeout(t.Context(), eventually)
	defer cancel()
	for _, lane := range []string{"nope", ""} {
		if ds, err := q.Fetch(ctx, lane, 1); len(ds) != 0 || !errors.Is(err, queue.ErrUnknownLane) {
			t.Errorf("Fetch(%q): got %d deliveries, %v, want ErrUnknownLane", lane, len(ds), err)
		}
	}
}

// testReleaseSpendsNoAttempt: a delivery given back with Release
// (queue.Releaser, what a replica does with the jobs it holds at shutdown)
// comes back at once with the same attempt, however often it is released:
// more releases than MaxAttempts (a run of rolling restarts) neither
// dead-letter the job nor spend its attempts. A Retry after them counts
// one.
func testReleaseSpendsNoAttempt(t *testing.T, h *harness) {
	q := h.open() // MaxAttempts 3
	id := enqueue(t, q, newJob(laneLow, 1))[0].ID
	for range 5 {
		d := fetchOne(t, q, laneLow)
		if j := d.Job(); j.ID != id || j.Attempt != 1 {
			t.Fatalf("after releases: got job %s attempt %d, want %s attempt 1", j.ID, j.Attempt, id)
		}
		r, ok := d.(queue.Releaser)
		if !ok {
			t.Skip("the backend's deliveries have no Release")
		}
		if err := r.Release(t.Context()); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	d := fetchOne(t, q, laneLow)
	if j := d.Job(); j.ID != id || j.Attempt != 1 {
		t.Fatalf("after 5 releases: got job %s attempt %d, want %s attempt 1", j.ID, j.Attempt, id)
	}
	if dead, err := d.Retry(t.Context(), 0, "failure 1"); dead || err != nil {
		t.Fatalf("Retry: got dead_lettered=%v err=%v, want false, nil", dead, err)
	}
	d = fetchOne(t, q, laneLow)
	if j := d.Job(); j.ID != id || j.Attempt != 2 {
		t.Errorf("after a retry: got job %s attempt %d, want %s attempt 2", j.ID, j.Attempt, id)
	}
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if dead := listDead(t, q, 10); len(dead) != 0 {
		t.Errorf("ListDead: got %v, want none", deadIDs(dead))
	}
}
