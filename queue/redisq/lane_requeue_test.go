package redisq_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

// A dead letter of a lane the queue no longer has is requeued into the
// last lane, and a Fetch of that lane gives its job with that lane, not
// the one stored with the job.
func TestRequeueFromRemovedLaneFetchesWithNewLane(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	before := open(t, srv, queue.Config{Name: "lanes", Lanes: []string{"gone", "kept"}})
	if _, err := before.Enqueue(t.Context(), &queue.Job{ID: "j1", Lane: "gone", Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	d := fetchOne(t, before, "gone")
	if err := d.DeadLetter(t.Context(), "provider said no"); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}

	after := open(t, srv, queue.Config{Name: "lanes", Lanes: []string{"kept"}})
	if n, err := after.Requeue(t.Context(), "j1"); n != 1 || err != nil {
		t.Fatalf("Requeue: got %d, %v; want 1, nil", n, err)
	}
	d = fetchOne(t, after, "kept")
	if j := d.Job(); j.ID != "j1" || j.Lane != "kept" {
		t.Errorf("fetched job %s of lane %q, want j1 of lane \"kept\"", j.ID, j.Lane)
	}
}

// fetchOne returns the one delivery a Fetch of lane gives within 5s.
func fetchOne(t *testing.T, q queue.Queue, lane string) queue.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ds, err := q.Fetch(ctx, lane, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch %s: got %d deliveries, %v; want 1", lane, len(ds), err)
	}
	return ds[0]
}
