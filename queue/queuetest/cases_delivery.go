package queuetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// testFIFOAndAck: jobs of a lane come out in the order they went in, and an
// acked job is gone for good, even after the visibility timeout.
func testFIFOAndAck(t *testing.T, h *harness) {
	q := h.open()
	const n = 6
	var ids []string
	batch := make([]*queue.Job, n-1)
	for i := range batch {
		batch[i] = newJob(laneLow, i)
	}
	for _, r := range enqueue(t, q, batch...) {
		ids = append(ids, r.ID)
	}
	ids = append(ids, enqueue(t, q, newJob(laneLow, n-1))[0].ID)

	ds := fetchN(t, q, laneLow, n)
	for i, d := range ds {
		j := d.Job()
		if got := payloadN(t, j); got != i {
			t.Errorf("delivery %d: got job n=%d, want n=%d (FIFO within a lane)", i, got, i)
		}
		if j.ID != ids[i] {
			t.Errorf("delivery %d: got id %q, want %q", i, j.ID, ids[i])
		}
		if j.Attempt != 1 || j.Lane != laneLow || j.EnqueuedAt.IsZero() {
			t.Errorf("delivery %d: got attempt=%d lane=%q enqueued_at=%v, want 1, %q, set",
				i, j.Attempt, j.Lane, j.EnqueuedAt, laneLow)
		}
	}
	expectNone(t, q, laneHigh, quiet)
	for i, d := range ds {
		if err := d.Ack(t.Context()); err != nil {
			t.Fatalf("Ack of delivery %d: %v", i, err)
		}
	}
	waitCounts(t, q, laneLow, 0, 0, 0)
	// Acked jobs never come back: wait past the visibility timeout, on this
	// consumer and on another one.
	expectNone(t, q, laneLow, visibility+visibility/2)
	expectNone(t, h.open(), laneLow, quiet)
}

// testRoundTrip: every field a producer sets comes back on delivery.
func testRoundTrip(t *testing.T, h *harness) {
	q := h.open()
	base := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	in := &queue.Job{
		ID: "given-id-" + h.name, Lane: laneHigh, User: "alice", Key: "idem-" + h.name,
		NotBefore: base, ExpiresAt: base.Add(time.Hour), Cost: 3,
		Payload: json.RawMessage(`{"to": "+15550100", "text": "hi", "parts": [1, 2]}`),
	}
	res := enqueue(t, q, in)
	if res[0].ID != in.ID || res[0].Duplicate {
		t.Errorf("Enqueue: got %+v, want the given id %q, not duplicate", res[0], in.ID)
	}
	if in.EnqueuedAt.IsZero() {
		t.Errorf("Enqueue did not set EnqueuedAt on the given job")
	}
	d := fetchOne(t, q, laneHigh)
	got := d.Job()
	if got.ID != in.ID || got.Lane != in.Lane || got.User != in.User || got.Key != in.Key || got.Cost != in.Cost {
		t.Errorf("got id=%q lane=%q user=%q key=%q cost=%d, want %q %q %q %q %d",
			got.ID, got.Lane, got.User, got.Key, got.Cost, in.ID, in.Lane, in.User, in.Key, in.Cost)
	}
	if !got.NotBefore.Equal(in.NotBefore) || !got.ExpiresAt.Equal(in.ExpiresAt) {
		t.Errorf("got not_before=%v expires_at=%v, want %v %v", got.NotBefore, got.ExpiresAt, in.NotBefore, in.ExpiresAt)
	}
	if diff := got.EnqueuedAt.Sub(in.EnqueuedAt).Abs(); diff > time.Millisecond {
		t.Errorf("got enqueued_at %v, want %v", got.EnqueuedAt, in.EnqueuedAt)
	}
	if !jsonEqual(got.Payload, in.Payload) {
		t.Errorf("got payload %s, want %s", got.Payload, in.Payload)
	}
	if got.Attempt != 1 || got.LastError != "" {
		t.Errorf("got attempt=%d last_error=%q, want 1 and none", got.Attempt, got.LastError)
	}
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// testRetryWithDelay: a retried job is held back for its delay, then
// delivered with Attempt one higher and LastError set.
func testRetryWithDelay(t *testing.T, h *harness) {
	q := h.open()
	id := enqueue(t, q, newJob(laneLow, 1))[0].ID
	d := fetchOne(t, q, laneLow)
	const delay = 1500 * time.Millisecond
	start := time.Now()
	dead, err := d.Retry(t.Context(), delay, "provider said 503")
	if err != nil || dead {
		t.Fatalf("Retry: got dead_lettered=%v err=%v, want false, nil", dead, err)
	}
	ls, _ := laneStats(t, q, laneLow)
	if time.Since(start) < delay-slack && (ls.Delayed != 1 || ls.Ready != 0 || ls.InFlight != 0) {
		t.Errorf("Stats before the retry is due: got ready=%d delayed=%d in_flight=%d, want 0 1 0",
			ls.Ready, ls.Delayed, ls.InFlight)
	}
	d = fetchOne(t, q, laneLow)
	if waited := time.Since(start); waited < delay-slack {
		t.Errorf("retried job delivered %s after Retry, before its delay of %s", waited, delay)
	}
	j := d.Job()
	if j.ID != id || j.Attempt != 2 || j.LastError != "provider said 503" || payloadN(t, j) != 1 {
		t.Errorf("got id=%q attempt=%d last_error=%q, want %q, 2, %q", j.ID, j.Attempt, j.LastError, id, "provider said 503")
	}
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// testAbandonedDelivery: a consumer fetches a job and never settles it (it
// died); after the visibility timeout another consumer gets the job, as its
// second attempt, and the first consumer can no longer settle it.
func testAbandonedDelivery(t *testing.T, h *harness) {
	q1 := h.open()
	id := enqueue(t, q1, newJob(laneLow, 7))[0].ID
	stale := fetchOne(t, q1, laneLow)
	fetched := time.Now()

	q2 := h.open()
	d := fetchOne(t, q2, laneLow)
	if waited := time.Since(fetched); waited < visibility-slack {
		t.Errorf("job delivered again %s after the first fetch, before the visibility timeout of %s", waited, visibility)
	}
	if j := d.Job(); j.ID != id || j.Attempt != 2 {
		t.Errorf("redelivery: got id=%q attempt=%d, want %q, 2", j.ID, j.Attempt, id)
	}
	if !h.feat.StaleSettleUndetected {
		if err := stale.Ack(t.Context()); !errors.Is(err, queue.ErrSettled) {
			t.Errorf("Ack of the abandoned delivery: got %v, want ErrSettled", err)
		}
	}
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack of the redelivery: %v", err)
	}
	waitCounts(t, q2, laneLow, 0, 0, 0)
	expectNone(t, q1, laneLow, quiet)
}

// testNotBefore: a job with NotBefore in the future waits for it; one with
// NotBefore in the past is ready at once.
func testNotBefore(t *testing.T, h *harness) {
	q := h.open()
	at := time.Now().Add(2 * time.Second)
	later := newJob(laneLow, 1)
	later.NotBefore = at
	past := newJob(laneLow, 2)
	past.NotBefore = time.Now().Add(-time.Hour)
	enqueue(t, q, later, past)

	// A backend's counts may trail its enqueue by a moment (JetStream's
	// consumer info): they must read 1 1 at some point before not_before.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ls, _ := laneStats(t, q, laneLow)
		if !time.Now().Before(at) || (ls.Delayed == 1 && ls.Ready == 1) {
			break
		}
		if time.Until(at) < 100*time.Millisecond {
			t.Errorf("Stats before not_before: got ready=%d delayed=%d, want 1 1", ls.Ready, ls.Delayed)
			break
		}
		<-tick.C
	}
	d := fetchOne(t, q, laneLow)
	if n := payloadN(t, d.Job()); n != 2 {
		t.Errorf("first delivery: got job n=%d, want the due job n=2", n)
	}
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	d = fetchOne(t, q, laneLow)
	if now := time.Now(); now.Before(at.Add(-slack)) {
		t.Errorf("job delivered %s before its not_before", at.Sub(now))
	}
	if j := d.Job(); payloadN(t, j) != 1 || j.Attempt != 1 {
		t.Errorf("second delivery: got n=%d attempt=%d, want 1, 1", payloadN(t, j), j.Attempt)
	}
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// testExtend: a consumer that extends its delivery keeps the job past the
// visibility timeout, and can still ack it.
func testExtend(t *testing.T, h *harness) {
	q1, q2 := h.open(), h.open()
	enqueue(t, q1, newJob(laneLow, 1))
	d := fetchOne(t, q1, laneLow)
	held := time.Now()
	for time.Since(held) < 2*visibility+visibility/2 {
		expectNone(t, q2, laneLow, quiet)
		if err := d.Extend(t.Context()); err != nil {
			t.Fatalf("Extend after %s: %v", time.Since(held), err)
		}
	}
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack after holding the job %s with Extend: %v", time.Since(held), err)
	}
	waitCounts(t, q2, laneLow, 0, 0, 0)
}
