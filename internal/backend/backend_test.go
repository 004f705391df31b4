package backend_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/backend"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// load builds a configuration for backend with the given keys on top.
func load(t *testing.T, b config.Backend, keys map[string]string) *config.Config {
	t.Helper()
	flags := map[string]string{
		"queue.name": "backendtest", "queue.backend": string(b), "queue.lanes": "vip:8,default:2",
		"pacer.rate": "100", "sink.url": "http://127.0.0.1:1/send", "metrics.listen": config.MetricsOff,
	}
	for k, v := range keys {
		flags[k] = v
	}
	cfg, err := config.Load("", nil, flags)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// roundTrip enqueues one job on q and fetches it back.
func roundTrip(t *testing.T, q queue.Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := q.Enqueue(ctx, &queue.Job{Lane: "vip", Payload: json.RawMessage(`{"to":"+15550100"}`)})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	ds, err := q.Fetch(ctx, "vip", 1)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(ds) != 1 || ds[0].Job().ID != res[0].ID {
		t.Fatalf("fetched %d deliveries, want the one job %s", len(ds), res[0].ID)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("ack: %v", err)
	}
}

// connectedClients is the number of clients the Redis server sees.
func connectedClients(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := rdb.ClientList(ctx).Result()
	if err != nil {
		t.Fatalf("client list: %v", err)
	}
	return strings.Count(list, "\n")
}

// With nothing given, the redis backend dials redis.url, and its closer
// closes that client.
func TestOpenRedisDials(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	probe := srv.Client()
	before := connectedClients(t, probe)
	q, closeQueue, err := backend.Open(context.Background(), load(t, config.BackendRedis, map[string]string{"redis.url": srv.URL()}), backend.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	roundTrip(t, q)
	if n := connectedClients(t, probe); n <= before {
		t.Errorf("clients while open: got %d, want more than %d", n, before)
	}
	if err := closeQueue(); err != nil {
		t.Errorf("close: %v", err)
	}
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the dialed client gone", func() bool {
		return connectedClients(t, probe) == before
	})
}

// Given a client, the redis backend uses it and leaves it open.
func TestOpenRedisKeepsAGivenClient(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	rdb := srv.Client()
	// redis.url points where nothing listens: the given client is used.
	cfg := load(t, config.BackendRedis, map[string]string{"redis.url": "redis://127.0.0.1:1/0"})
	q, closeQueue, err := backend.Open(context.Background(), cfg, backend.Options{Redis: rdb, Consumer: "replica-1"})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	roundTrip(t, q)
	if err := closeQueue(); err != nil {
		t.Errorf("close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("the given client after close: %v, want it still open", err)
	}
}

// The nats backend dials nats.url and needs no Redis; given a connection,
// it uses it and leaves it open.
func TestOpenNATS(t *testing.T) {
	srv := testnats.Start(t)
	cfg := load(t, config.BackendNATS, map[string]string{"nats.url": srv.URL(), "redis.url": "redis://127.0.0.1:1/0"})
	q, closeQueue, err := backend.Open(context.Background(), cfg, backend.Options{})
	if err != nil {
		t.Fatalf("Open (dialing): %v", err)
	}
	roundTrip(t, q)
	if err := closeQueue(); err != nil {
		t.Errorf("close: %v", err)
	}

	nc := srv.Conn()
	cfg = load(t, config.BackendNATS, map[string]string{"nats.url": "nats://127.0.0.1:1"})
	q, closeQueue, err = backend.Open(context.Background(), cfg, backend.Options{NATS: nc, Consumer: "replica-1"})
	if err != nil {
		t.Fatalf("Open (given a connection): %v", err)
	}
	roundTrip(t, q)
	if err := closeQueue(); err != nil {
		t.Errorf("close: %v", err)
	}
	if nc.IsClosed() {
		t.Error("the given connection was closed, want it left open")
	}
}

// With Attach, the nats backend opens only a queue that exists, and makes
// nothing: a missing one is natsq.ErrNoQueue.
func TestOpenNATSAttach(t *testing.T) {
	srv := testnats.Start(t)
	cfg := load(t, config.BackendNATS, map[string]string{"nats.url": srv.URL()})
	if _, _, err := backend.Open(context.Background(), cfg, backend.Options{Attach: true}); !errors.Is(err, natsq.ErrNoQueue) {
		t.Fatalf("Open with Attach before any dispatcher: %v, want natsq.ErrNoQueue", err)
	}
	_, closeRun, err := backend.Open(context.Background(), cfg, backend.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer closeRun()
	q, closeQueue, err := backend.Open(context.Background(), cfg, backend.Options{Attach: true})
	if err != nil {
		t.Fatalf("Open with Attach after a dispatcher: %v", err)
	}
	roundTrip(t, q)
	if err := closeQueue(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// A backend that cannot be reached is an error naming it; nothing is left
// open (goleak checks).
func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := load(t, config.BackendNATS, map[string]string{"nats.url": "nats://127.0.0.1:1"})
	if _, _, err := backend.Open(ctx, cfg, backend.Options{}); err == nil || !strings.Contains(err.Error(), "nats") {
		t.Errorf("Open with nothing at nats.url: %v, want an error naming nats", err)
	}
}

// An unknown queue.backend is refused with an error naming the key, the
// value and the backends there are.
func TestOpenUnknownBackend(t *testing.T) {
	cfg := load(t, config.BackendRedis, nil)
	cfg.Queue.Backend = "kafka"
	_, _, err := backend.Open(context.Background(), cfg, backend.Options{})
	if !errors.Is(err, backend.ErrUnknown) {
		t.Fatalf("Open with backend kafka: %v, want ErrUnknown", err)
	}
	for _, want := range []string{"queue.backend", `"kafka"`, "nats, redis"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestNames(t *testing.T) {
	if got, want := strings.Join(backend.Names(), ","), "nats,redis"; got != want {
		t.Errorf("Names: got %s, want %s", got, want)
	}
}
