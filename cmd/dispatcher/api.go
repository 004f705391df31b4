package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/api"
	"github.com/sluicehq/sluice/internal/backend"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/replica"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// serveAPICmd is `dispatcher serve-api`: the HTTP ingest API as a process
// of its own, so that producers in any language can enqueue. It is a
// separate command rather than a listener in every replica so that the
// replicas, which hold the provider's credentials, take no writes from the
// network, and so that ingest can be scaled, placed and exposed apart from
// the dispatchers. It needs only the queue and Redis, and its own api:
// keys (config.LoadAPI): not pacer.rate, sink.url or the provider's secret.
func serveAPICmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "serve-api",
		Short: "Serve the HTTP ingest API (enqueue, look up, cancel, status) on api.listen",
		Long: "serve-api serves the HTTP ingest API described in docs/openapi.yaml on api.listen\n" +
			"(127.0.0.1:8480 by default), guarded by the bearer token in api.token_file. Jobs are\n" +
			"checked against the queue's limits, and the sink's bounds when sink.url is given,\n" +
			"before they are stored. It needs queue.name, redis.url (and nats.url with backend\n" +
			"nats) and api.token_file; not pacer.rate, sink.url or the provider's secret.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServeAPI(cmd.Context(), g) },
	}
}

func runServeAPI(ctx context.Context, g *globals) error {
	cfg, err := config.LoadAPI(g.Path(), os.Environ(), g.Overrides())
	if err != nil {
		return cli.Usage(err)
	}
	token, err := cfg.API.Token()
	if err != nil {
		return cli.Usage(err)
	}
	p, err := newIngestProducer(cfg)
	if err != nil {
		return cli.Usage(err)
	}
	log, err := g.logger()
	if err != nil {
		return err
	}
	parts, err := openIngest(ctx, cfg, log)
	if err != nil {
		return cli.Failure(err)
	}
	defer parts.close()
	prod, err := producer.New(parts.queue, cfg.PriorityConfig(), p...)
	if err != nil {
		return cli.Failure(err)
	}
	opts := api.Options{Queue: cfg.Queue.Name, Backend: string(cfg.Queue.Backend), Producer: prod,
		Inspector: parts.queue, Token: token, MaxBodyBytes: cfg.API.MaxBodyBytes, MaxBatch: cfg.API.MaxBatch,
		Log: log, Rate: rateOf(parts.controls, parts.members)}
	opts.Locator, _ = parts.queue.(queue.Locator)
	opts.Canceler, _ = parts.queue.(queue.Canceler)
	srv, err := api.New(opts)
	if err != nil {
		return cli.Failure(err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.API.Listen)
	if err != nil {
		return cli.Failure(fmt.Errorf("api.listen: %w", err))
	}
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() {
		log.Warn("sluice: the ingest API listens beyond loopback; put TLS in front of it", "listen", addr.String())
	}
	log.Info("sluice: ingest api", "url", "http://"+addr.String()+"/v1/queues/"+cfg.Queue.Name)
	if err := srv.Serve(ctx, ln); err != nil {
		return cli.Failure(err)
	}
	log.Info("sluice: ingest api stopped")
	return nil
}

// ingestParts are what serve-api uses: the queue, and the pacer's controls
// and live replicas in Redis for the status, read without a pacer of its
// own, which would need pacer.rate.
type ingestParts struct {
	queue    queue.Queue
	controls *pacer.Controls
	members  *pacer.Members
	closers  []func() error
}

// openIngest connects to Redis and opens the queue of cfg's backend
// (sharing the Redis client with the redis backend).
func openIngest(ctx context.Context, cfg *config.Config, log *slog.Logger) (*ingestParts, error) {
	redis.SetLogger(cli.QuietRedis{}) // go-redis' own dial retries are reported by sluice
	p := &ingestParts{}
	rdb, err := cfg.RedisClient()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	p.closers = append(p.closers, rdb.Close)
	if p.controls, p.members, err = pacerReaders(rdb, cfg); err != nil {
		p.close()
		return nil, err
	}
	host, _ := os.Hostname()
	q, closeQ, err := backend.Open(ctx, cfg, backend.Options{Consumer: host + "-" + strconv.Itoa(os.Getpid()), Redis: rdb, Log: log})
	if err != nil {
		p.close()
		return nil, err
	}
	p.queue = q
	// The queue (and the NATS connection it dialed) closes before Redis.
	p.closers = append([]func() error{closeQ}, p.closers...)
	return p, nil
}

// pacerReaders returns the controls and the members of cfg's pacer. With
// pacer.rate given, the controls report it as the configured rate until a
// replica has written its own, as a replica's do; without it, 0.
func pacerReaders(rdb redis.UniversalClient, cfg *config.Config) (*pacer.Controls, *pacer.Members, error) {
	members, err := pacer.NewMembers(rdb, cfg.Pacer.Name)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Pacer.Rate == 0 {
		controls, err := pacer.NewControls(rdb, cfg.Pacer.Name)
		return controls, members, err
	}
	pc, err := pacer.New(rdb, cfg.PacerConfig())
	if err != nil {
		return nil, nil, err
	}
	return pc.Controls(), members, nil
}

// close closes the queue, then Redis.
func (p *ingestParts) close() {
	for _, c := range p.closers {
		_ = c()
	}
	p.closers = nil
}

// newIngestProducer returns the producer options for cfg: the queue's
// limits, and, when the configuration has the HTTP sink's URL, its bounds
// on a job's own request, so that a job the dispatchers would not send is
// refused at enqueue.
func newIngestProducer(cfg *config.Config) ([]producer.Option, error) {
	opts := []producer.Option{producer.WithMaxPayloadBytes(cfg.Queue.MaxPayloadBytes), producer.WithMaxCost(cfg.Queue.MaxCost)}
	if cfg.Sink.Type == config.SinkHTTP && cfg.Sink.URL != "" {
		b, err := sink.NewBounds(cfg.HTTPSinkConfig())
		if err != nil {
			return nil, err
		}
		opts = append(opts, producer.WithJobCheck(b.Check))
	}
	return opts, nil
}

// rateOf reads the pacer's state and the live replicas for the status.
func rateOf(controls *pacer.Controls, members *pacer.Members) func(context.Context) (*api.RateStatus, error) {
	return func(ctx context.Context) (*api.RateStatus, error) {
		st, err := controls.State(ctx)
		if err != nil {
			return nil, err
		}
		reps, err := members.Replicas(ctx, replica.LiveWindow)
		if err != nil {
			return nil, err
		}
		r := &api.RateStatus{Configured: st.ConfiguredRate, Effective: st.EffectiveRate, Override: st.RateOverride,
			Paused: st.Paused, Replicas: len(reps)}
		if st.ThrottledUntil.After(st.Now) {
			r.ThrottledForSeconds = st.ThrottledUntil.Sub(st.Now).Seconds()
		}
		return r, nil
	}
}
