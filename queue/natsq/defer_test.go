package natsq_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/queue"
)

// A deferred job goes to the back of its lane with its attempt unchanged:
// a job enqueued after it comes first.
func TestDefer(t *testing.T) {
	srv := testnats.Start(t)
	q, _ := open(t, srv.Conn(), queue.Config{Name: "defer", Lanes: []string{"default"}, Consumer: "c1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := q.Enqueue(ctx, &queue.Job{ID: "d1", Payload: json.RawMessage(`1`)}, &queue.Job{ID: "d2", Payload: json.RawMessage(`2`)}); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Fetch(ctx, "default", 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v %v", ds, err)
	}
	if err := ds[0].(queue.Deferrer).Defer(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var got []queue.Delivery
	for len(got) < 2 {
		more, err := q.Fetch(ctx, "default", 2-len(got))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, more...)
	}
	if got[0].Job().ID != "d2" || got[1].Job().ID != "d1" || got[1].Job().Attempt != 1 {
		t.Errorf("after defer: %s, %s (attempt %d); want d2, then d1 at attempt 1",
			got[0].Job().ID, got[1].Job().ID, got[1].Job().Attempt)
	}
}
