package redisq

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

// A deferred job goes to the back of its lane with its attempt unchanged:
// a job enqueued after it comes first.
func TestDefer(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	q := openTest(t, srv, "defer", "c1")
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, &queue.Job{ID: "d1", Payload: json.RawMessage(`1`)}, &queue.Job{ID: "d2", Payload: json.RawMessage(`2`)}); err != nil {
		t.Fatal(err)
	}
	d := fetchN(t, q, "default", 1)[0]
	if err := d.(queue.Deferrer).Defer(ctx, 0); err != nil {
		t.Fatal(err)
	}
	got := fetchN(t, q, "default", 2)
	if got[0].Job().ID != "d2" || got[1].Job().ID != "d1" || got[1].Job().Attempt != 1 {
		t.Errorf("after defer: %s, %s (attempt %d); want d2, then d1 at attempt 1",
			got[0].Job().ID, got[1].Job().ID, got[1].Job().Attempt)
	}
	if err := d.Ack(ctx); err == nil {
		t.Error("ack after defer: no error, want ErrSettled")
	}
}
