package sink

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// benchJob is a job as the engine sends one: an id, a lane, an attempt, an
// enqueue time and a small JSON payload.
func benchJob() *queue.Job {
	return &queue.Job{ID: "job-1", Lane: "default", Attempt: 1, EnqueuedAt: time.Now(),
		Payload: json.RawMessage(`{"to":"+15550100","text":"hi"}`)}
}

// BenchmarkSend is one job to a local provider and its answer, on a kept
// connection: the sink's whole cost per job, with the provider's.
// go test -run '^$' -bench Send ./sink/
func BenchmarkSend(b *testing.B) {
	p := newProvider(b, answer(200, `{"id":"1"}`))
	h := newSink(b, HTTPConfig{URL: p.URL + "/send"})
	j := benchJob()
	ctx := WithGate(context.Background(), func() error { return nil })
	b.ReportAllocs()
	for b.Loop() {
		if err := h.Send(ctx, j); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendToTheWire is the sink's part of a job before its request
// leaves: from Send to the hold at the write (which refuses, so nothing
// is written and the connection stays kept), as "ns-to-write", and the
// allocations on the way.
func BenchmarkSendToTheWire(b *testing.B) {
	p := newProvider(b, answer(200, "ok"))
	h := newSink(b, HTTPConfig{URL: p.URL + "/send"})
	j := benchJob()
	var start time.Time
	var total time.Duration
	ctx := WithHold(WithGate(context.Background(), func() error { return nil }), func() error {
		total += time.Since(start)
		return ErrLate
	})
	b.ReportAllocs()
	for b.Loop() {
		start = time.Now()
		_ = h.Send(ctx, j)
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns-to-write")
}
