package natsq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
)

// TestAckBatch: a batch of acks settles every delivery once; acking them
// again, or a foreign delivery, is ErrSettled; acked jobs never come back
// after the visibility timeout.
func TestAckBatch(t *testing.T) {
	srv := testnats.Start(t)
	cfg := queue.Config{Name: "ackbatch", Lanes: []string{"only"}, VisibilityTimeout: 500 * time.Millisecond}
	q, _ := open(t, srv.Conn(), cfg)
	other, _ := open(t, srv.Conn(), queue.Config{Name: "ackbatch-other", Lanes: []string{"only"}})
	const n = 20
	for i := range n {
		enqueue(t, q, &queue.Job{ID: fmt.Sprint("j", i), Payload: json.RawMessage(`{}`), Lane: "only"})
	}
	var ds []queue.Delivery
	for len(ds) < n {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		got, err := q.Fetch(ctx, "only", n-len(ds))
		cancel()
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		ds = append(ds, got...)
	}
	enqueue(t, other, &queue.Job{ID: "foreign", Payload: json.RawMessage(`{}`), Lane: "only"})
	foreign := fetchOne(t, other, "only")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for i, err := range q.AckBatch(ctx, append(ds, foreign)) {
		if want := i == n; errors.Is(err, queue.ErrSettled) != want || (!want && err != nil) {
			t.Errorf("AckBatch, delivery %d: got %v, want ErrSettled %v", i, err, want)
		}
	}
	for i, err := range q.AckBatch(ctx, ds[:3]) {
		if !errors.Is(err, queue.ErrSettled) {
			t.Errorf("second AckBatch, delivery %d: got %v, want ErrSettled", i, err)
		}
	}
	if err := foreign.Ack(ctx); err != nil {
		t.Errorf("the foreign delivery's own Ack: %v", err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer wcancel()
	if got, err := q.Fetch(wctx, "only", n); len(got) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Fetch after the visibility timeout: got %d deliveries, %v, want none", len(got), err)
	}
}

// BenchmarkAcks compares 100 acks confirmed one by one from 100 goroutines
// at once (the engine without a batch acker) with one AckBatch of 100. The
// jobs are enqueued and fetched outside the timed part; cpu-µs/job is the
// process's CPU (client and embedded server) per ack.
func BenchmarkAcks(b *testing.B) {
	const batch = 100
	for _, mode := range []string{"each-concurrent", "batch"} {
		b.Run(mode, func(b *testing.B) {
			q := benchQueue(b, "benchack")
			ctx := context.Background()
			b.ReportAllocs()
			var cpu time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if _, err := q.Enqueue(ctx, jobs(batch)...); err != nil {
					b.Fatal(err)
				}
				var ds []queue.Delivery
				for len(ds) < batch {
					got, err := q.Fetch(ctx, "only", batch-len(ds))
					if err != nil {
						b.Fatal(err)
					}
					ds = append(ds, got...)
				}
				c0 := processCPU()
				b.StartTimer()
				ackAll(b, q, ds, mode == "batch")
				b.StopTimer()
				cpu += processCPU() - c0
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*batch), "cpu-µs/job")
			reportRate(b, b.N*batch)
		})
	}
}

// ackAll acks ds with one AckBatch, or with one Ack per goroutine.
func ackAll(b *testing.B, q *natsq.Queue, ds []queue.Delivery, batched bool) {
	ctx := context.Background()
	if batched {
		for _, err := range q.AckBatch(ctx, ds) {
			if err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(func() {
			if err := d.Ack(ctx); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}

// processCPU is the user and system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestAckBatchSharesOneSubscription: batches of acks share one
// subscription for the server's confirmations instead of subscribing each
// time; after Close, acks are still confirmed (on a subscription of their
// own) and the shared one is gone.
func TestAckBatchSharesOneSubscription(t *testing.T) {
	srv := testnats.Start(t)
	nc := srv.Conn()
	q, _ := open(t, nc, queue.Config{Name: "ackshare", Lanes: []string{"only"}})
	const batches, per = 5, 4
	for i := range batches*per + per {
		enqueue(t, q, &queue.Job{ID: fmt.Sprint("j", i), Payload: json.RawMessage(`{}`), Lane: "only"})
	}
	var ds []queue.Delivery
	for len(ds) < batches*per+per {
		ds = append(ds, fetchOne(t, q, "only"))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for b := range batches {
		for i, err := range q.AckBatch(ctx, ds[b*per:(b+1)*per]) {
			if err != nil {
				t.Fatalf("batch %d, ack %d: %v", b, i, err)
			}
		}
	}
	// Counted by the queue: the connection's own count also holds the
	// short-lived subscriptions of fetches and the mover.
	if n := natsq.AckSubscriptions(q); n != 1 {
		t.Errorf("subscriptions for confirmations after %d batches: %d, want 1 (shared)", batches, n)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if natsq.AckSubscribed(q) {
		t.Error("the shared subscription is still open after Close")
	}
	closed := nc.NumSubscriptions()
	for i, err := range q.AckBatch(ctx, ds[batches*per:]) {
		if err != nil {
			t.Errorf("ack %d after Close: %v", i, err)
		}
	}
	if got := nc.NumSubscriptions(); got > closed || natsq.AckSubscribed(q) { // the batch's own is gone
		t.Errorf("after a batch after Close: %d subscriptions (want at most %d), shared open %v (want false)", got, closed, natsq.AckSubscribed(q))
	}
}
