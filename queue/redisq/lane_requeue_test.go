package redisq_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
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

// With WithKeepLanes, a dead letter of a lane the queue does not have is
// left where it is and named, by id and by --all, while the others are
// requeued, into their own lane only.
func TestRequeueKeepLanes(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	run := open(t, srv, queue.Config{Name: "keep", Lanes: []string{"otp", "bulk"}})
	for _, j := range []struct{ id, lane string }{{"j1", "otp"}, {"j2", "bulk"}, {"j3", "otp"}} {
		if _, err := run.Enqueue(t.Context(), &queue.Job{ID: j.id, Lane: j.lane, Payload: json.RawMessage(`1`)}); err != nil {
			t.Fatal(err)
		}
		if err := fetchOne(t, run, j.lane).DeadLetter(t.Context(), "no"); err != nil {
			t.Fatalf("DeadLetter %s: %v", j.id, err)
		}
	}
	admin, err := redisq.New(srv.Client(), queue.Config{Name: "keep", Lanes: []string{"bulk"}}, redisq.WithKeepLanes())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	n, err := admin.Requeue(t.Context(), "j1")
	if n != 0 || !errors.Is(err, redisq.ErrUnknownLane) || !strings.Contains(err.Error(), "j1 (lane otp)") {
		t.Errorf("Requeue j1 of lane otp: got %d, %v; want 0 and ErrUnknownLane naming j1 (lane otp)", n, err)
	}
	n, err = admin.Requeue(t.Context())
	if n != 1 || !errors.Is(err, redisq.ErrUnknownLane) || !strings.Contains(err.Error(), "j3 (lane otp)") {
		t.Errorf("Requeue all: got %d, %v; want 1 (j2) and ErrUnknownLane naming j1 and j3", n, err)
	}
	dead, err := run.ListDead(t.Context(), 10)
	if err != nil || len(dead) != 2 || dead[0].Job.ID != "j1" || dead[1].Job.ID != "j3" {
		t.Errorf("dead letters left: %+v, %v; want j1 and j3", dead, err)
	}
	if d := fetchOne(t, run, "bulk"); d.Job().ID != "j2" {
		t.Errorf("requeued into bulk: %s, want j2", d.Job().ID)
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
