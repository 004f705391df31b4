package queuetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// testDedup: the same idempotency key within the window is stored once,
// alone or inside a batch, and stays remembered after the job is acked.
func testDedup(t *testing.T, h *harness) {
	q := h.open()
	keyed := func(key string, n int) *queue.Job {
		j := newJob(laneLow, n)
		j.Key = key
		return j
	}
	first := enqueue(t, q, keyed("order-42", 1))[0]
	if first.Duplicate || first.ID == "" {
		t.Fatalf("first enqueue of a key: got %+v, want stored with an id", first)
	}
	second := enqueue(t, q, keyed("order-42", 2))[0]
	if !second.Duplicate {
		t.Errorf("second enqueue of the key: got Duplicate=false, want true")
	}
	if h.feat.OriginalIDOnDuplicate && second.ID != first.ID {
		t.Errorf("second enqueue of the key: got id %q, want the original %q", second.ID, first.ID)
	}
	res := enqueue(t, q, keyed("order-43", 3), keyed("order-43", 4), newJob(laneLow, 5), keyed("order-42", 6))
	for i, want := range []bool{false, true, false, true} {
		if res[i].Duplicate != want {
			t.Errorf("batch result %d: got Duplicate=%v, want %v", i, res[i].Duplicate, want)
		}
	}
	if h.feat.OriginalIDOnDuplicate && (res[1].ID != res[0].ID || res[3].ID != first.ID) {
		t.Errorf("batch duplicates: got ids %q and %q, want %q and %q", res[1].ID, res[3].ID, res[0].ID, first.ID)
	}
	waitCounts(t, q, laneLow, 3, 0, 0)
	ds := fetchN(t, q, laneLow, 3)
	for i, want := range []int{1, 3, 5} {
		if got := payloadN(t, ds[i].Job()); got != want {
			t.Errorf("delivery %d: got job n=%d, want n=%d", i, got, want)
		}
		if err := ds[i].Ack(t.Context()); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
	again := enqueue(t, q, keyed("order-42", 7))[0]
	if !again.Duplicate {
		t.Errorf("enqueue of the key after its job was acked, within the window: got Duplicate=false, want true")
	}
	expectNone(t, q, laneLow, quiet)
}

// testInvalidJobs: every bad job gets an ErrInvalidJob naming the field and
// stores nothing; a batch with one bad job stores none of the batch.
func testInvalidJobs(t *testing.T, h *harness) {
	q := h.open()
	now := time.Now()
	payload := []byte(`{"n": 1}`)
	cases := []struct {
		name  string
		job   queue.Job
		field string
	}{
		{"payload missing", queue.Job{Lane: laneLow}, "payload"},
		{"payload not JSON", queue.Job{Payload: []byte(`{"to":`)}, "payload"},
		{"payload over the limit", queue.Job{Payload: []byte(`"` + strings.Repeat("x", maxPayload) + `"`)}, "payload"},
		{"unknown lane", queue.Job{Lane: "nope", Payload: payload}, "lane"},
		{"negative cost", queue.Job{Cost: -1, Payload: payload}, "cost"},
		{"expires before not_before", queue.Job{NotBefore: now.Add(time.Hour), ExpiresAt: now.Add(time.Minute), Payload: payload}, "expires_at"},
		{"expires at not_before", queue.Job{NotBefore: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour), Payload: payload}, "expires_at"},
		{"cost over queue.max_cost", queue.Job{Cost: queue.DefaultMaxCost + 1, Payload: payload}, "cost"},
		{"null payload", queue.Job{Payload: []byte(`null`)}, "payload"},
		{"id not UTF-8", queue.Job{ID: "bad\xffid", Payload: payload}, "id"},
		{"key not UTF-8", queue.Job{Key: "k\xfe", Payload: payload}, "key"},
		{"request path relative", queue.Job{Payload: payload, Request: &queue.Request{Path: "sms"}}, "request.path"},
	}
	for _, c := range cases {
		given := c.job.ID
		_, err := q.Enqueue(t.Context(), &c.job)
		checkInvalid(t, c.name, err, c.field)
		if c.job.ID != given {
			t.Errorf("%s: the refused job was given id %q", c.name, c.job.ID)
		}
	}
	good1 := &queue.Job{Key: "kept-out-" + h.name, Payload: payload}
	good2 := &queue.Job{Lane: laneHigh, Payload: payload}
	_, err := q.Enqueue(t.Context(), good1, &queue.Job{Cost: -1, Payload: payload}, good2)
	checkInvalid(t, "batch with a bad job", err, "cost")
	if err != nil && !strings.Contains(err.Error(), "job 1") {
		t.Errorf("batch with a bad job: got %q, want it to name job 1", err)
	}
	if good1.ID != "" || good2.ID != "" {
		t.Errorf("batch with a bad job: its good jobs were given ids %q, %q", good1.ID, good2.ID)
	}
	_, err = q.Enqueue(t.Context(), &queue.Job{Payload: payload}, nil)
	checkInvalid(t, "batch with a nil job", err, "job")

	expectEmpty(t, q)
	// The refused batch's idempotency key was not remembered either.
	if r := enqueue(t, q, &queue.Job{Key: good1.Key, Payload: payload})[0]; r.Duplicate {
		t.Errorf("key of a refused batch: got Duplicate=true, want the key unused")
	}
}

// checkInvalid checks that err matches ErrInvalidJob and names field.
func checkInvalid(t *testing.T, name string, err error, field string) {
	t.Helper()
	if !errors.Is(err, queue.ErrInvalidJob) {
		t.Errorf("%s: got error %v, want ErrInvalidJob", name, err)
		return
	}
	var fe *queue.FieldError
	if !errors.As(err, &fe) || fe.Field != field || !strings.Contains(err.Error(), field) {
		t.Errorf("%s: got %q, want a FieldError naming %q", name, err, field)
	}
}

// expectEmpty checks that no lane holds anything and nothing can be fetched.
func expectEmpty(t *testing.T, q queue.Queue) {
	t.Helper()
	st, err := q.Stats(t.Context())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	for _, ls := range st.Lanes {
		if ls.Ready != 0 || ls.Delayed != 0 || ls.InFlight != 0 {
			t.Errorf("lane %s: got ready=%d delayed=%d in_flight=%d, want all 0", ls.Lane, ls.Ready, ls.Delayed, ls.InFlight)
		}
	}
	if st.DeadLetters != 0 {
		t.Errorf("got %d dead letters, want 0", st.DeadLetters)
	}
	for _, lane := range []string{laneHigh, laneLow} {
		ctx, cancel := context.WithTimeout(t.Context(), quiet/2)
		ds, _ := q.Fetch(ctx, lane, 10)
		cancel()
		if len(ds) != 0 {
			t.Errorf("lane %s: fetched %d jobs, want none", lane, len(ds))
		}
	}
}
