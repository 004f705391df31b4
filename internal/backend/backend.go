// Package backend opens the durable queue a configuration names. It is the
// one place that knows which queue backends exist: each is an opener in
// the registry below, keyed by its queue.backend name. The dispatcher's
// replicas (internal/replica, and through it the demo) and the producer
// command open their queue here.
//
// Adding a backend: write its queue package (passing queue/queuetest),
// add its opener to openers, and its name to queue.backend's validation
// in internal/config.
package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
	"github.com/sluicehq/sluice/queue/redisq"
)

// ErrUnknown is returned by Open for a queue.backend no opener is
// registered under.
var ErrUnknown = errors.New("backend: unknown queue backend")

// Options change how Open connects. The zero value dials what the
// configuration says.
type Options struct {
	// Consumer names this consumer of the queue (one per replica). Zero
	// means the queue's default, enough for a producer.
	Consumer string
	// Redis, when set, is used by the redis backend instead of dialing
	// redis.url; Open does not close it.
	Redis redis.UniversalClient
	// NATS, when set, is used by the nats backend instead of dialing
	// nats.url; Open does not close it.
	NATS *nats.Conn
	// Log receives the queue's logs. Zero means slog.Default().
	Log *slog.Logger
	// Rider, when set, gives the redis backend what to send behind each
	// blocking read (redisq.WithRider): the replica's pacer rides its
	// call for a slot there. Other backends ignore it.
	Rider func() redisq.Rider
	// Attach opens the queue for administration (the admin commands, the
	// ingest API) rather than to run it: the queue must exist, and its
	// backend state is used as the dispatchers left it, never created or
	// updated from this configuration. On NATS, the streams and the lane
	// consumers are only looked up (natsq.WithAttach), and a missing one is
	// an error matching natsq.ErrNoQueue. A redis queue creates nothing
	// until it fetches, so Attach changes nothing there.
	Attach bool
	// KeepLanes makes the queue's Requeue leave a dead letter whose lane
	// is not in queue.lanes, and name it in its error, instead of putting
	// it in the last lane (redisq.WithKeepLanes, natsq.WithKeepLanes): for
	// a process whose queue.lanes may not be the lanes the dispatchers
	// read.
	KeepLanes bool
}

// opener opens one backend's queue from cfg and returns it with the
// closers of the connections it dialed itself.
type opener func(ctx context.Context, cfg *config.Config, qcfg queue.Config, o Options) (queue.Queue, []func() error, error)

// openers is the registry of backends, by queue.backend name. It is fixed
// at compile time: nothing registers at run time.
var openers = map[config.Backend]opener{
	config.BackendRedis: openRedis,
	config.BackendNATS:  openNATS,
}

// Names returns the registered backends' names, sorted.
func Names() []string {
	var names []string
	for b := range maps.Keys(openers) {
		names = append(names, string(b))
	}
	slices.Sort(names)
	return names
}

// Open opens the queue of cfg's queue.backend. It returns the queue and a
// function that closes it, then the connections Open dialed (never those
// given in o). On error nothing is left open. An unknown backend matches
// ErrUnknown and names queue.backend.
func Open(ctx context.Context, cfg *config.Config, o Options) (queue.Queue, func() error, error) {
	open, ok := openers[cfg.Queue.Backend]
	if !ok {
		return nil, nil, fmt.Errorf("%w: queue.backend: %q, want one of %s", ErrUnknown, cfg.Queue.Backend, strings.Join(Names(), ", "))
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	qcfg := cfg.QueueConfig()
	if o.Consumer != "" {
		qcfg.Consumer = o.Consumer
	}
	q, closers, err := open(ctx, cfg, qcfg, o)
	if err != nil {
		_ = closeAll(closers)
		return nil, nil, fmt.Errorf("backend: open %s queue: %w", cfg.Queue.Backend, err)
	}
	// The queue closes before the connections it runs on.
	closers = append([]func() error{q.Close}, closers...)
	return q, func() error { return closeAll(closers) }, nil
}

// closeAll runs every closer in order and joins their errors.
func closeAll(closers []func() error) error {
	var errs []error
	for _, c := range closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// openRedis opens a Redis Streams queue on o.Redis, else on a client to
// redis.url.
func openRedis(_ context.Context, cfg *config.Config, qcfg queue.Config, o Options) (queue.Queue, []func() error, error) {
	var closers []func() error
	rdb := o.Redis
	if rdb == nil {
		c, err := cfg.RedisClient()
		if err != nil {
			return nil, nil, fmt.Errorf("redis: %w", err)
		}
		rdb = c
		closers = append(closers, c.Close)
	}
	opts := []redisq.Option{redisq.WithLogger(o.Log),
		redisq.WithMinReplicas(cfg.Redis.MinReplicasAcked, cfg.Redis.MinReplicasTimeout)}
	if o.Rider != nil {
		opts = append(opts, redisq.WithRider(o.Rider))
	}
	if o.KeepLanes {
		opts = append(opts, redisq.WithKeepLanes())
	}
	q, err := redisq.New(rdb, qcfg, opts...)
	if err != nil {
		return nil, closers, err
	}
	return q, closers, nil
}

// natsCloseFlush bounds the flush that sends a dialed connection's last
// acknowledgements before it closes.
const natsCloseFlush = 5 * time.Second

// openNATS opens a JetStream queue on o.NATS, else on a connection to
// nats.url.
func openNATS(ctx context.Context, cfg *config.Config, qcfg queue.Config, o Options) (queue.Queue, []func() error, error) {
	var closers []func() error
	nc := o.NATS
	if nc == nil {
		c, err := cfg.ConnectNATS(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("nats: %w", err)
		}
		nc = c
		closers = append(closers, func() error { return flushClose(c) })
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, closers, fmt.Errorf("jetstream: %w", err)
	}
	opts := []natsq.Option{natsq.WithLogger(o.Log), natsq.WithReplicas(max(cfg.NATS.Replicas, 1))}
	if o.Attach {
		opts = append(opts, natsq.WithAttach())
	}
	if o.KeepLanes {
		opts = append(opts, natsq.WithKeepLanes())
	}
	q, err := natsq.New(ctx, js, qcfg, opts...)
	if err != nil {
		return nil, closers, err
	}
	return q, closers, nil
}

// flushClose sends what nc still buffers (the last acks) and closes it.
// Unlike Drain it returns once the connection is closed.
func flushClose(nc *nats.Conn) error {
	err := nc.FlushTimeout(natsCloseFlush)
	nc.Close()
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("backend: nats: flush before close: %w", err)
	}
	return nil
}
