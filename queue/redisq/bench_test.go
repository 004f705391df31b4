package redisq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

var benchPayload = json.RawMessage(`{"to":"+15550100","text":"your code is 123456"}`)

// benchQueue starts a private redis-server and opens a queue on it; it also
// returns a client of that server.
func benchQueue(b *testing.B) (queue.Queue, *redis.Client) {
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
	return q, srv.Client()
}

// newJobs returns n fresh jobs, each with an idempotency key when keyed.
func newJobs(n int, keyed bool) []*queue.Job {
	jobs := make([]*queue.Job, n)
	for i := range jobs {
		jobs[i] = &queue.Job{Payload: benchPayload}
		if keyed {
			jobs[i].Key = queue.NewID()
		}
	}
	return jobs
}

// redisMicros is the time Redis spent running commands since its stats
// were last reset (INFO commandstats), in microseconds.
func redisMicros(b *testing.B, rdb *redis.Client) float64 {
	b.Helper()
	st, err := testredis.CommandStats(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, c := range st {
		total += c.Usec
	}
	return total
}

// BenchmarkEnqueue stores jobs in batches of 1 and 100; one op is one batch.
// It also reports Redis' own time per job: a single job without a key is
// one plain XADD, a keyed one (and a batch) goes through enqueue.lua.
func BenchmarkEnqueue(b *testing.B) {
	for _, c := range []struct {
		batch int
		keyed bool
	}{{1, false}, {1, true}, {100, false}} {
		b.Run(fmt.Sprintf("batch=%d/keyed=%v", c.batch, c.keyed), func(b *testing.B) {
			q, rdb := benchQueue(b)
			ctx := context.Background()
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := q.Enqueue(ctx, newJobs(c.batch, c.keyed)...); err != nil {
					b.Fatalf("Enqueue: %v", err)
				}
			}
			b.StopTimer()
			jobs := float64(b.N * c.batch)
			b.ReportMetric(jobs/b.Elapsed().Seconds(), "jobs/s")
			b.ReportMetric(redisMicros(b, rdb)/jobs, "redis-µs/job")
		})
	}
}

// BenchmarkFetchAck fetches batches of 100 jobs and acks each one; one op is
// one batch. The jobs are enqueued before the timer starts.
func BenchmarkFetchAck(b *testing.B) {
	const batch = 100
	b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
		q, _ := benchQueue(b)
		ctx := context.Background()
		for range b.N {
			if _, err := q.Enqueue(ctx, newJobs(batch, false)...); err != nil {
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

// BenchmarkAckBatch acks a batch of 32 deliveries in one AckBatch while the
// consumer holds 64 more of the lane's entries, as a replica at the ceiling
// does (its buffer and its requests in flight): Redis's time per job
// acked (redis-µs/job, from INFO commandstats) is the figure. One op is one
// batch; the jobs are enqueued and fetched outside the timer.
func BenchmarkAckBatch(b *testing.B) {
	const batch, held = 32, 64
	q, rdb := benchQueue(b)
	ctx := context.Background()
	var ds []queue.Delivery
	refill := func() {
		for len(ds) < batch+held {
			if _, err := q.Enqueue(ctx, newJobs(batch, false)...); err != nil {
				b.Fatalf("Enqueue: %v", err)
			}
			got, err := q.Fetch(ctx, "only", batch)
			if err != nil {
				b.Fatalf("Fetch: %v", err)
			}
			ds = append(ds, got...)
		}
	}
	refill()
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	var micros float64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		// Every other delivery of the oldest 64: the batch's range holds
		// as many of the consumer's entries not in it.
		var acks, keep []queue.Delivery
		for i, d := range ds {
			if i < 2*batch && i%2 == 0 {
				acks = append(acks, d)
			} else {
				keep = append(keep, d)
			}
		}
		for _, err := range q.(queue.BatchAcker).AckBatch(ctx, acks) {
			if err != nil {
				b.Fatalf("AckBatch: %v", err)
			}
		}
		ds = keep
		b.StopTimer()
		st, err := testredis.CommandStats(ctx, rdb)
		if err != nil {
			b.Fatal(err)
		}
		micros += st["evalsha"].Usec // the script's commands run inside it
		refill()
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(micros/float64(b.N*batch), "redis-µs/job")
}
