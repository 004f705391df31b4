package redisq_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// timeRider sends TIME behind each blocking read and records when Redis
// ran it and how many jobs the read brought.
type timeRider struct {
	mu     sync.Mutex
	cmd    *redis.TimeCmd
	ranAt  []time.Time
	landed []int
}

func (r *timeRider) Send(ctx context.Context, pipe redis.Pipeliner) { r.cmd = pipe.Time(ctx) }

func (r *timeRider) Landed(jobs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, _ := r.cmd.Result()
	r.ranAt = append(r.ranAt, at)
	r.landed = append(r.landed, jobs)
}

func (r *timeRider) seen() ([]time.Time, []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.ranAt...), append([]int(nil), r.landed...)
}

// blockedClients is how many clients of srv wait in a blocking command.
func blockedClients(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.InfoMap(context.Background(), "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(info["Clients"]["blocked_clients"])
	if err != nil {
		t.Fatalf("blocked_clients: %v", err)
	}
	return n
}

// A rider's command runs the moment a blocking read returns, in the same
// round trip: after the job that ended the wait was enqueued, not when the
// read was sent; and Landed hears how many jobs came (none when the block
// slice ended empty).
func TestRiderRunsWhenTheReadReturns(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	rdb := srv.Client()
	r := &timeRider{}
	q, err := redisq.New(srv.Client(), queue.Config{Name: "ride", Lanes: []string{"default"}},
		redisq.WithRider(func() redisq.Rider { return r }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// An empty lane: the read blocks, and a block slice ends with no job.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	ds, err := q.Fetch(short, "default", 1)
	cancelShort()
	if (err != nil && !errors.Is(err, context.DeadlineExceeded)) || len(ds) != 0 {
		t.Fatalf("empty lane: %d jobs, %v", len(ds), err)
	}
	if _, landed := r.seen(); len(landed) != 1 || landed[0] != 0 {
		t.Fatalf("after an empty block: landed %v, want [0]", landed)
	}

	got := make(chan []queue.Delivery, 1)
	go func() {
		ds, err := q.Fetch(ctx, "default", 1)
		if err != nil {
			t.Error(err)
		}
		got <- ds
	}()
	poll.Until(t, 5*time.Second, time.Millisecond, "the fetch to block", func() bool { return blockedClients(t, rdb) == 1 })
	before, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, &queue.Job{ID: "j1", Lane: "default", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if ds := <-got; len(ds) != 1 {
		t.Fatalf("fetched %d jobs, want 1", len(ds))
	}
	ranAt, landed := r.seen()
	if len(landed) != 2 || landed[1] != 1 {
		t.Fatalf("landed %v, want [0 1]", landed)
	}
	if ranAt[1].Before(before) {
		t.Fatalf("the rider ran at %s, before the job was enqueued (%s): it did not wait behind the read", ranAt[1], before)
	}
}

// Rides need the read and the rider on one connection, within the
// client's read timeout: with a read timeout shorter than twice the block
// slice the queue reads alone.
func TestNoRiderWithAShortReadTimeout(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	asked := 0
	q, err := redisq.New(rdb, queue.Config{Name: "ride", Lanes: []string{"default"}},
		redisq.WithRider(func() redisq.Rider { asked++; return &timeRider{} }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := q.Fetch(ctx, "default", 1); err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	if asked != 0 {
		t.Fatalf("asked for a rider %d times with a 50ms read timeout and a 100ms block, want none", asked)
	}
}
