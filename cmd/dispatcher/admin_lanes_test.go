package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// Run without the dispatchers' configuration, the admin commands do not
// know their lanes: dlq requeue leaves a dead letter of a lane it was not
// told of (naming queue.lanes) instead of moving it to a lane no replica
// reads, status says the lanes shown are not the dispatchers', and with
// the lanes given (SLUICE_QUEUE_LANES) the job goes back to its own lane.
func TestRequeueKeepsTheJobsLane(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run, err := redisq.New(srv.Client(), queue.Config{Name: "sms", Lanes: []string{"otp", "bulk"}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if _, err := run.Enqueue(ctx, &queue.Job{ID: "j1", Lane: "otp", Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	ds, err := run.Fetch(ctx, "otp", 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %d, %v", len(ds), err)
	}
	if err := ds[0].DeadLetter(ctx, "provider said no"); err != nil {
		t.Fatal(err)
	}

	env := map[string]string{"SLUICE_REDIS_URL": srv.URL(), "SLUICE_QUEUE_NAME": "sms"}
	code, out, stderr := runCmd(t, env, "dlq", "requeue", "j1")
	if code != 1 || !strings.Contains(stderr, "queue.lanes") || !strings.Contains(stderr, "j1 (lane otp)") {
		t.Errorf("dlq requeue j1 without the lanes: exit %d, %q %q; want 1 naming queue.lanes and j1 (lane otp)", code, out, stderr)
	}
	if n, err := srv.Client().Exists(ctx, "sluice:{sms}:lane:default").Result(); err != nil || n != 0 {
		t.Errorf("lane stream default after the requeue: exists %d, %v; want none", n, err)
	}
	if _, out, _ := runCmd(t, env, "status"); !strings.Contains(out, "queue.lanes is not configured here") {
		t.Errorf("status without the lanes does not say so:\n%s", out)
	}
	if _, out, _ := runCmd(t, env, "status", "--json"); !strings.Contains(out, `"lanes_assumed": true`) {
		t.Errorf("status --json without the lanes does not say so:\n%s", out)
	}

	env["SLUICE_QUEUE_LANES"] = "otp,bulk"
	if code, out, stderr := runCmd(t, env, "dlq", "requeue", "j1"); code != 0 || !strings.Contains(out, "requeued 1") {
		t.Fatalf("dlq requeue j1 with the lanes: exit %d, %q %q", code, out, stderr)
	}
	ds, err = run.Fetch(ctx, "otp", 1)
	if err != nil || len(ds) != 1 || ds[0].Job().ID != "j1" {
		t.Fatalf("fetch otp after the requeue: %d deliveries, %v; want j1", len(ds), err)
	}
	if _, out, _ := runCmd(t, env, "status"); strings.Contains(out, "queue.lanes is not configured here") || !strings.Contains(out, "otp") {
		t.Errorf("status with the lanes given:\n%s", out)
	}
	if _, out, _ := runCmd(t, env, "status", "--json"); strings.Contains(out, "lanes_assumed") {
		t.Errorf("status --json with the lanes given says they are assumed:\n%s", out)
	}
}
