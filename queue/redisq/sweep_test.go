package redisq_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// groupConsumers returns the consumers of stream's group "sluice" by name.
func groupConsumers(t *testing.T, rdb *redis.Client, stream string) map[string]redis.XInfoConsumer {
	t.Helper()
	cs, err := rdb.XInfoConsumers(context.Background(), stream, "sluice").Result()
	if err != nil {
		t.Fatalf("XINFO CONSUMERS %s: %v", stream, err)
	}
	out := map[string]redis.XInfoConsumer{}
	for _, c := range cs {
		out[c.Name] = c
	}
	return out
}

// Sweep removes a consumer that is idle past the limit and holds no entry;
// it keeps one that holds an entry (until the entry is claimed away), one
// idle for less than the limit, and the queue's own.
func TestSweepRemovesIdleEmptyConsumers(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	rdb := srv.Client()
	ctx := context.Background()
	const limit = time.Second
	cfg := queue.Config{Name: "sweep", Lanes: []string{"vip", "default"}, VisibilityTimeout: time.Second,
		ConsumerIdleLimit: limit, Consumer: "self"}
	q := open(t, srv, cfg)
	if _, err := q.Enqueue(ctx, &queue.Job{ID: "j1", Lane: "default", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	vip, def := "sluice:{sweep}:lane:vip", "sluice:{sweep}:lane:default"
	for _, stream := range []string{vip, def} {
		if err := rdb.XGroupCreateMkStream(ctx, stream, "sluice", "0").Err(); err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"self", "dead"} {
			if err := rdb.XGroupCreateConsumer(ctx, stream, "sluice", c).Err(); err != nil {
				t.Fatalf("XGROUP CREATECONSUMER %s %s: %v", stream, c, err)
			}
		}
	}
	// "holder" takes j1 and never settles it, as a replica killed mid-flight.
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "sluice", Consumer: "holder", Streams: []string{def, ">"}, Count: 1}).Err(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "every consumer idle past the limit", func() bool {
		for _, stream := range []string{vip, def} {
			for _, c := range groupConsumers(t, rdb, stream) {
				if c.Idle < limit {
					return false
				}
			}
		}
		return true
	})
	if err := rdb.XGroupCreateConsumer(ctx, def, "sluice", "fresh").Err(); err != nil {
		t.Fatal(err)
	}

	removed, err := q.Sweep(ctx)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	want := []redisq.LaneConsumer{{Lane: "vip", Consumer: "dead"}, {Lane: "default", Consumer: "dead"}}
	if !slices.Equal(removed, want) {
		t.Errorf("Sweep removed %v, want %v", removed, want)
	}
	gotNames := func(stream string) []string {
		var names []string
		for n := range groupConsumers(t, rdb, stream) {
			names = append(names, n)
		}
		slices.Sort(names)
		return names
	}
	if got, want := gotNames(def), []string{"fresh", "holder", "self"}; !slices.Equal(got, want) {
		t.Errorf("default lane's consumers after Sweep: %v, want %v (holder holds j1, fresh is not idle, self is the caller)", got, want)
	}
	if got, want := gotNames(vip), []string{"self"}; !slices.Equal(got, want) {
		t.Errorf("vip lane's consumers after Sweep: %v, want %v", got, want)
	}

	// Once another consumer claims j1 (as a fetch does after the
	// visibility timeout), holder holds nothing and goes at the next Sweep.
	if err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: def, Group: "sluice", Consumer: "fresh", MinIdle: 0, Start: "0-0", Count: 10}).Err(); err != nil {
		t.Fatal(err)
	}
	if removed, err = q.Sweep(ctx); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if want := []redisq.LaneConsumer{{Lane: "default", Consumer: "holder"}}; !slices.Equal(removed, want) {
		t.Errorf("Sweep after j1 was claimed away removed %v, want %v", removed, want)
	}
	if got, want := gotNames(def), []string{"fresh", "self"}; !slices.Equal(got, want) {
		t.Errorf("default lane's consumers after the second Sweep: %v, want %v", got, want)
	}

	counts, err := q.Consumers(ctx)
	if err != nil {
		t.Fatalf("Consumers: %v", err)
	}
	if want := map[string]int64{"vip": 1, "default": 2}; len(counts) != 2 || counts["vip"] != want["vip"] || counts["default"] != want["default"] {
		t.Errorf("Consumers = %v, want %v", counts, want)
	}
}

// A queue that fetches removes the idle consumers of others by itself; one
// with a negative limit removes none. A lane without a stream yet counts
// no consumer.
func TestSweepRunsWhileFetching(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	rdb := srv.Client()
	ctx := context.Background()
	base := queue.Config{Name: "loop", Lanes: []string{"only"}, VisibilityTimeout: time.Second}
	off := base
	off.ConsumerIdleLimit, off.Consumer = -1, "off"
	qOff := open(t, srv, off)
	if n, err := qOff.Consumers(ctx); err != nil || n["only"] != 0 {
		t.Errorf("Consumers before any stream = %v, %v; want only: 0", n, err)
	}
	if _, err := qOff.Enqueue(ctx, &queue.Job{ID: "j1", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	stream := "sluice:{loop}:lane:only"
	if err := rdb.XGroupCreateMkStream(ctx, stream, "sluice", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XGroupCreateConsumer(ctx, stream, "sluice", "dead").Err(); err != nil {
		t.Fatal(err)
	}
	// The queue with the clean-up off fetches first: it never removes dead.
	ds, err := qOff.Fetch(ctx, "only", 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch: %d deliveries, %v; want 1", len(ds), err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "dead idle past 2s", func() bool {
		return groupConsumers(t, rdb, stream)["dead"].Idle >= 2*time.Second
	})
	if _, ok := groupConsumers(t, rdb, stream)["dead"]; !ok {
		t.Fatal("dead removed by a queue whose clean-up is off")
	}

	on := base
	on.ConsumerIdleLimit, on.Consumer = time.Second, "on"
	qOn := open(t, srv, on)
	if _, err := qOn.Enqueue(ctx, &queue.Job{ID: "j2", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if ds, err = qOn.Fetch(ctx, "only", 1); err != nil || len(ds) != 1 {
		t.Fatalf("Fetch: %d deliveries, %v; want 1", len(ds), err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "dead and off removed by the fetching queue", func() bool {
		cs := groupConsumers(t, rdb, stream)
		_, dead := cs["dead"]
		_, off := cs["off"]
		return !dead && !off
	})
	// The clean-up runs every 250ms or so: by the time its own consumer
	// has been idle for twice the limit, it has passed it over many times.
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the fetching queue's own consumer idle for 2s, and kept", func() bool {
		c, ok := groupConsumers(t, rdb, stream)["on"]
		if !ok {
			t.Fatal("the fetching queue removed its own consumer")
		}
		return c.Idle >= 2*time.Second
	})
}
