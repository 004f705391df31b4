// Package replica assembles one sluice replica from a loaded configuration:
// the queue backend, the pacer, the sink, the dispatch engine, its metrics
// and its HTTP endpoints. cmd/dispatcher and the demo run replicas built
// here; the admin commands use Open's queue and pacer without an engine.
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/backend"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
	"github.com/sluicehq/sluice/sink"
)

// Options change how Open connects. The zero value connects as the
// configuration says.
type Options struct {
	// ID names the replica (its queue consumer and its entry among the
	// live replicas). Zero means host name and process id.
	ID string
	// Redis, when set, is used instead of connecting to redis.url; Open
	// does not close it.
	Redis redis.UniversalClient
	// NATS, when set, is used instead of connecting to nats.url; Open does
	// not close it.
	NATS *nats.Conn
	// Log receives the replica's logs. Zero means slog.Default().
	Log *slog.Logger
}

// Parts are a replica's connections and components, closed by Close.
type Parts struct {
	ID     string
	Config *config.Config
	Redis  redis.UniversalClient
	Queue  queue.Queue
	Pacer  *pacer.Pacer
	Log    *slog.Logger

	closers []func() error
}

// Open connects to Redis and opens the pacer of cfg, and its queue with
// backend.Open (sharing the Redis client with the redis backend).
func Open(ctx context.Context, cfg *config.Config, opts Options) (*Parts, error) {
	p := &Parts{ID: opts.ID, Config: cfg, Log: opts.Log}
	if p.ID == "" {
		host, _ := os.Hostname()
		p.ID = host + "-" + strconv.Itoa(os.Getpid())
	}
	if p.Log == nil {
		p.Log = slog.Default()
	}
	if err := p.open(ctx, opts); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Parts) open(ctx context.Context, opts Options) error {
	p.Redis = opts.Redis
	if p.Redis == nil {
		rdb, err := p.Config.RedisClient()
		if err != nil {
			return fmt.Errorf("replica: redis: %w", err)
		}
		p.Redis = rdb
		p.closers = append(p.closers, rdb.Close)
	}
	pcfg := p.Config.PacerConfig()
	pcfg.Log = p.Log
	pc, err := pacer.New(p.Redis, pcfg)
	if err != nil {
		return fmt.Errorf("replica: pacer: %w", err)
	}
	p.Pacer = pc
	// The pacer's call for a slot rides on the queue's blocking reads
	// (pacer.Ride): both share p.Redis.
	ride := func() redisq.Rider {
		if r := pc.Ride(); r != nil {
			return r
		}
		return nil
	}
	q, closeQueue, err := backend.Open(ctx, p.Config, backend.Options{Consumer: p.ID, Redis: p.Redis, NATS: opts.NATS, Log: p.Log, Rider: ride})
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	p.Queue = q
	// The queue (and the NATS connection it dialed) closes before Redis.
	p.closers = append([]func() error{closeQueue}, p.closers...)
	return nil
}

// NewSink builds the configured sink.
func (p *Parts) NewSink() (sink.Sender, func() error, error) {
	if p.Config.Sink.Type == config.SinkLog {
		return sink.NewLog(p.Log), func() error { return nil }, nil
	}
	s, err := sink.NewHTTP(p.Config.HTTPSinkConfig())
	if err != nil {
		return nil, nil, fmt.Errorf("replica: sink: %w", err)
	}
	return s, s.Close, nil
}

// Close closes the queue, then the connections Open made.
func (p *Parts) Close() error {
	var errs []error
	for _, c := range p.closers {
		errs = append(errs, c())
	}
	p.closers = nil
	return errors.Join(errs...)
}
