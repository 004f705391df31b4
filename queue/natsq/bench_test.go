package natsq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
)

// benchPayload is a typical SMS request.
var benchPayload = json.RawMessage(`{"to":"+15550100","text":"your code is 123456"}`)

// benchQueue opens a fresh queue on an embedded server (file storage in a
// temporary directory).
func benchQueue(b *testing.B, name string) *natsq.Queue {
	b.Helper()
	srv := testnats.Start(b)
	q, _ := open(b, srv.Conn(), queue.Config{Name: name, Lanes: []string{"only"}, VisibilityTimeout: time.Minute})
	return q
}

// jobs returns n new jobs.
func jobs(n int) []*queue.Job {
	js := make([]*queue.Job, n)
	for i := range js {
		js[i] = &queue.Job{Payload: benchPayload}
	}
	return js
}

// reportRate reports jobs per second over the timed part of the benchmark.
func reportRate(b *testing.B, jobs int) {
	b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkEnqueue measures Enqueue of one job (a synchronous publish) and
// of batches of 100 (asynchronous publishes awaited together).
func BenchmarkEnqueue(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			q := benchQueue(b, "benchenq")
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := q.Enqueue(ctx, jobs(batch)...); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportRate(b, b.N*batch)
		})
	}
}

// BenchmarkFetchAck measures Fetch of 100 jobs and the Ack of each (the
// acks one after the other, each confirmed by the server). The jobs are
// enqueued outside the timed part.
func BenchmarkFetchAck(b *testing.B) {
	const batch = 100
	b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
		q := benchQueue(b, "benchfetch")
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			if _, err := q.Enqueue(ctx, jobs(batch)...); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for got := 0; got < batch; {
				ds, err := q.Fetch(ctx, "only", batch-got)
				if err != nil {
					b.Fatal(err)
				}
				for _, d := range ds {
					if err := d.Ack(ctx); err != nil {
						b.Fatal(err)
					}
				}
				got += len(ds)
			}
		}
		b.StopTimer()
		reportRate(b, b.N*batch)
	})
}
