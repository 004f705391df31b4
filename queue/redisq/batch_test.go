package redisq

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

func openTest(t *testing.T, srv *testredis.Server, name, consumer string) *Queue {
	t.Helper()
	q, err := New(srv.Client(), queue.Config{Name: name, Lanes: []string{"vip", "default"},
		Consumer: consumer, VisibilityTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func fetchN(t *testing.T, q *Queue, lane string, n int) []queue.Delivery {
	t.Helper()
	var out []queue.Delivery
	for len(out) < n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ds, err := q.Fetch(ctx, lane, n-len(out))
		cancel()
		if err != nil {
			t.Fatalf("fetch %s: %v", lane, err)
		}
		out = append(out, ds...)
	}
	return out
}

// AckBatch acks deliveries of several lanes in one call each, and reports
// a delivery settled before as ErrSettled.
func TestAckBatch(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	q := openTest(t, srv, "ackbatch", "c1")
	ctx := context.Background()
	var jobs []*queue.Job
	for i := range 6 {
		lane := "default"
		if i%3 == 0 {
			lane = "vip"
		}
		jobs = append(jobs, &queue.Job{Lane: lane, Payload: json.RawMessage(`1`)})
	}
	if _, err := q.Enqueue(ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	ds := append(fetchN(t, q, "vip", 2), fetchN(t, q, "default", 4)...)
	if err := ds[5].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	errs := q.AckBatch(ctx, ds)
	for i, err := range errs[:5] {
		if err != nil {
			t.Errorf("delivery %d: %v, want acked", i, err)
		}
	}
	if !errors.Is(errs[5], queue.ErrSettled) {
		t.Errorf("delivery acked before: %v, want ErrSettled", errs[5])
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range st.Lanes {
		if l.Ready+l.InFlight+l.Delayed != 0 {
			t.Errorf("lane %s after acks: %+v, want empty", l.Lane, l)
		}
	}
}

// AckBatch reads the consumer's pending entries between the batch's lowest
// and highest ids in one go, and looks an entry up alone when more of the
// consumer's entries lie between than that read brings: entries far apart
// among many held ones are acked, and an entry that became another
// consumer's is not, whether the read was whole or cut.
func TestAckBatchAmongManyPending(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	q1 := openTest(t, srv, "ackmany", "c1")
	q2 := openTest(t, srv, "ackmany", "c2")
	ctx := context.Background()
	const n = 200 // more than any batch's read between its ends (2×4+64)
	jobs := make([]*queue.Job, n)
	for i := range jobs {
		jobs[i] = &queue.Job{Payload: json.RawMessage(`1`)}
	}
	if _, err := q1.Enqueue(ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	ds := fetchN(t, q1, "default", n)
	// Two of c1's deliveries go back and become c2's.
	for _, i := range []int{2, 100} {
		if err := ds[i].(queue.Releaser).Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	taken := fetchN(t, q2, "default", 2)

	check := func(batch []int, settled map[int]bool) {
		t.Helper()
		b := make([]queue.Delivery, len(batch))
		for k, i := range batch {
			b[k] = ds[i]
		}
		for k, err := range q1.AckBatch(ctx, b) {
			switch i := batch[k]; {
			case settled[i] && !errors.Is(err, queue.ErrSettled):
				t.Errorf("delivery %d, now c2's: %v, want ErrSettled", i, err)
			case !settled[i] && err != nil:
				t.Errorf("delivery %d: %v, want acked", i, err)
			}
		}
	}
	// Cut: 199 of c1's entries lie from ds[0] to ds[199].
	check([]int{199, 0, 100, 150}, map[int]bool{100: true})
	// Whole: ds[1] to ds[3] holds two of c1's entries.
	check([]int{1, 2, 3}, map[int]bool{2: true})

	st, err := q1.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Lanes[1].InFlight, int64(n-5); got != want {
		t.Errorf("in flight after the batches: %d, want %d (c1's %d left and c2's 2)", got, want, n-7)
	}
	for _, d := range taken {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("c2's ack of a job c1 released: %v", err)
		}
	}
}

// Entry ids order by their numbers, not their text.
func TestEntryLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"9-5", "10-0", true},
		{"10-2", "10-10", true},
		{"10-10", "10-2", false},
		{"10-2", "10-2", false},
		{"x", "y", true}, // not ids: by their text
	} {
		if got := entryLess(c.a, c.b); got != c.want {
			t.Errorf("entryLess(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// A released job is fetched again at once by another consumer, with the
// same attempt number.
func TestRelease(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	q1 := openTest(t, srv, "release", "c1")
	q2 := openTest(t, srv, "release", "c2")
	ctx := context.Background()
	if _, err := q1.Enqueue(ctx, &queue.Job{ID: "r1", Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	d := fetchN(t, q1, "default", 1)[0]
	if d.Job().Attempt != 1 {
		t.Fatalf("first delivery attempt %d, want 1", d.Job().Attempt)
	}
	if err := d.(queue.Releaser).Release(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d2 := fetchN(t, q2, "default", 1)[0]
	if d2.Job().ID != "r1" || d2.Job().Attempt != 1 {
		t.Errorf("after release: job %s attempt %d, want r1 attempt 1", d2.Job().ID, d2.Job().Attempt)
	}
	if waited := time.Since(start); waited > 900*time.Millisecond {
		t.Errorf("released job came back after %s, want before the 1s visibility timeout", waited)
	}
	if err := d.Ack(ctx); !errors.Is(err, queue.ErrSettled) {
		t.Errorf("ack after release: %v, want ErrSettled", err)
	}
	if err := d2.Ack(ctx); err != nil {
		t.Errorf("ack by the new consumer: %v", err)
	}
}
