package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// With WithMinReplicas an enqueue returns once the replicas hold its jobs,
// and fails with ErrNotReplicated when fewer replicas than asked confirm.
func TestEnqueueWaitsForReplicas(t *testing.T) {
	master := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, master)
	replica := testredis.Start(t, testredis.Options{ReplicaOf: master.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc := master.Client()
	rrc := replica.Client()
	for ctx.Err() == nil { // the replica has synced when WAIT 1 counts it
		if n, _ := rc.Do(ctx, "WAIT", 1, 100).Int(); n == 1 {
			break
		}
	}
	cfg := queue.Config{Name: "wait", Lanes: []string{"default"}}

	one, err := redisq.New(rc, cfg, redisq.WithMinReplicas(1, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = one.Close() })
	if _, err := one.Enqueue(ctx, &queue.Job{ID: "a", Lane: "default", Payload: []byte(`{}`)}); err != nil {
		t.Fatalf("enqueue with 1 replica asked of 1: %v", err)
	}
	// Acknowledged means on the replica already: read it there at once.
	if n, err := rrc.XLen(ctx, "sluice:{wait}:lane:default").Result(); err != nil || n != 1 {
		t.Fatalf("replica's stream length right after the enqueue: got %d, %v; want 1", n, err)
	}

	two, err := redisq.New(rc, cfg, redisq.WithMinReplicas(2, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = two.Close() })
	_, err = two.Enqueue(ctx, &queue.Job{ID: "b", Lane: "default", Payload: []byte(`{}`)})
	if !errors.Is(err, redisq.ErrNotReplicated) {
		t.Fatalf("enqueue with 2 replicas asked of 1: got %v, want ErrNotReplicated", err)
	}
	t.Logf("not confirmed: %v", err)

	// A client that cannot reach one master on one connection is refused.
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": master.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	r, err := redisq.New(ring, cfg, redisq.WithMinReplicas(1, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if _, err := r.Enqueue(ctx, &queue.Job{ID: "c", Lane: "default", Payload: []byte(`{}`)}); err == nil {
		t.Fatal("enqueue through a ring client waiting for replicas: got nil error")
	}
}

// BenchmarkEnqueueMinReplicas is the cost of waiting for a replica: batches
// of 1 and 100 on a master with one replica on the same host, without and
// with WithMinReplicas(1). One op is one batch.
func BenchmarkEnqueueMinReplicas(b *testing.B) {
	master := testredis.Start(b, testredis.Options{})
	if master.Mini() != nil {
		b.Skip("benchmarks need a real redis-server")
	}
	testredis.Start(b, testredis.Options{ReplicaOf: master.Addr()})
	rc := master.Client()
	ctx := context.Background()
	for rc.Do(ctx, "WAIT", 1, 100).Val() != int64(1) { // until the replica is in sync
	}
	for _, wait := range []int{0, 1} {
		for _, batch := range []int{1, 100} {
			b.Run(fmt.Sprintf("min_replicas=%d/batch=%d", wait, batch), func(b *testing.B) {
				q, err := redisq.New(rc, queue.Config{Name: fmt.Sprintf("bench%d%d", wait, batch), Lanes: []string{"only"}},
					redisq.WithMinReplicas(wait, time.Second))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = q.Close() })
				b.ReportAllocs()
				for b.Loop() {
					if _, err := q.Enqueue(ctx, newJobs(batch, false)...); err != nil {
						b.Fatalf("Enqueue: %v", err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
			})
		}
	}
}
