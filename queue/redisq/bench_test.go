package redisq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

var benchPayload = json.RawMessage(`{"to":"+15550100","text":"your code is 123456"}`)

// benchQueue starts a private redis-server and opens a queue on it.
func benchQueue(b *testing.B) queue.Queue {
	b.Helper()
	srv := testredis.Start(b, testredis.Options{})
	if srv.Mini() != nil {
		b.Skip("benchmarks need a real redis-server")
	}
	q, err := redisq.New(srv.Client(), queue.Config{Name: "bench", Lanes: []string{"only"}, VisibilityTimeout: time.Minute})
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	b.Cleanup(func() { _ = q.Close() })
	return q
}

// newJobs returns n fresh jobs.
func newJobs(n int) []*queue.Job {
	jobs := make([]*queue.Job, n)
	for i := range jobs {
		jobs[i] = &queue.Job{Payload: benchPayload}
	}
	return jobs
}

// BenchmarkEnqueue stores jobs in batches of 1 and 100; one op is one batch.
func BenchmarkEnqueue(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			q := benchQueue(b)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := q.Enqueue(ctx, newJobs(batch)...); err != nil {
					b.Fatalf("Enqueue: %v", err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkFetchAck fetches batches of 100 jobs and acks each one; one op is
// one batch. The jobs are enqueued before the timer starts.
func BenchmarkFetchAck(b *testing.B) {
	const batch = 100
	b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
		q := benchQueue(b)
		ctx := context.Background()
		for range b.N {
			if _, err := q.Enqueue(ctx, newJobs(batch)...); err != nil {
				b.Fatalf("Enqueue: %v", err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			ds, err := q.Fetch(ctx, "only", batch)
			if err != nil || len(ds) != batch {
				b.Fatalf("Fetch: got %d deliveries, %v", len(ds), err)
			}
			for _, d := range ds {
				if err := d.Ack(ctx); err != nil {
					b.Fatalf("Ack: %v", err)
				}
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
	})
}
