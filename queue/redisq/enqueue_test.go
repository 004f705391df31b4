package redisq_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

// scriptCalls is how many EVALSHA calls rdb's server has run since its
// stats were reset.
func scriptCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	st, err := testredis.CommandStats(context.Background(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	return st["evalsha"].Calls
}

// A single job with no idempotency key and no due time is stored with one
// plain XADD, no script; a job with either still goes through the script.
// Both come out of Fetch the same.
func TestPlainEnqueueRunsNoScript(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	rdb := srv.Client()
	q := open(t, srv, queue.Config{Name: "plain", Lanes: []string{"high", "default"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	plain := &queue.Job{Lane: "high", Payload: json.RawMessage(`{"to":"+1"}`), Cost: 2}
	res, err := q.Enqueue(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	if n := scriptCalls(t, rdb); n != 0 {
		t.Errorf("a plain job ran %d scripts, want 0", n)
	}
	if res[0].ID != plain.ID || res[0].Duplicate {
		t.Errorf("result %+v, want the job's id %s, not a duplicate", res[0], plain.ID)
	}
	keyed := &queue.Job{Lane: "high", Key: "k1", Payload: json.RawMessage(`{}`)}
	if _, err := q.Enqueue(ctx, keyed); err != nil {
		t.Fatal(err)
	}
	if n := scriptCalls(t, rdb); n != 1 {
		t.Errorf("after a job with a key: %d scripts, want 1", n)
	}
	dup, err := q.Enqueue(ctx, &queue.Job{Lane: "high", Key: "k1", Payload: json.RawMessage(`{}`)})
	if err != nil || !dup[0].Duplicate || dup[0].ID != keyed.ID {
		t.Errorf("the key's second job: %+v, %v; want a duplicate of %s", dup, err, keyed.ID)
	}

	ds, err := q.Fetch(ctx, "high", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Fatalf("fetched %d jobs, want 2", len(ds))
	}
	got := ds[0].Job()
	if got.ID != plain.ID || got.Lane != "high" || string(got.Payload) != `{"to":"+1"}` || got.Cost != 2 ||
		got.Attempt != 1 || !got.EnqueuedAt.Equal(plain.EnqueuedAt) {
		t.Errorf("fetched %+v, want %+v at attempt 1", got, plain)
	}
	if ds[1].Job().ID != keyed.ID {
		t.Errorf("second job %s, want %s", ds[1].Job().ID, keyed.ID)
	}
}
