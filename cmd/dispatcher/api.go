package main

import (
	"context"
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/api"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/replica"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// serveAPICmd is `dispatcher serve-api`: the HTTP ingest API as a process
// of its own, so that producers in any language can enqueue. It is a
// separate command rather than a listener in every replica so that the
// replicas, which hold the provider's credentials, take no writes from the
// network, and so that ingest can be scaled, placed and exposed apart from
// the dispatchers (it needs only the queue and Redis).
func serveAPICmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "serve-api",
		Short: "Serve the HTTP ingest API (enqueue, look up, cancel, status) on api.listen",
		Long: "serve-api serves the HTTP ingest API described in docs/openapi.yaml on api.listen\n" +
			"(127.0.0.1:8480 by default), guarded by the bearer token in api.token_file. Jobs are\n" +
			"checked against the queue's limits and the sink's bounds before they are stored.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServeAPI(cmd.Context(), g) },
	}
}

func runServeAPI(ctx context.Context, g *globals) error {
	cfg, err := g.load()
	if err != nil {
		return err
	}
	token, err := cfg.API.Token()
	if err != nil {
		return cli.Usage(err)
	}
	p, err := newIngestProducer(cfg)
	if err != nil {
		return cli.Usage(err)
	}
	parts, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer parts.Close()
	prod, err := producer.New(parts.Queue, cfg.PriorityConfig(), p...)
	if err != nil {
		return cli.Failure(err)
	}
	opts := api.Options{Queue: cfg.Queue.Name, Backend: string(cfg.Queue.Backend), Producer: prod,
		Inspector: parts.Queue, Token: token, MaxBodyBytes: cfg.API.MaxBodyBytes, MaxBatch: cfg.API.MaxBatch,
		Log: parts.Log, Rate: rateOf(parts)}
	opts.Locator, _ = parts.Queue.(queue.Locator)
	opts.Canceler, _ = parts.Queue.(queue.Canceler)
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
		parts.Log.Warn("sluice: the ingest API listens beyond loopback; put TLS in front of it", "listen", addr.String())
	}
	parts.Log.Info("sluice: ingest api", "url", "http://"+addr.String()+"/v1/queues/"+cfg.Queue.Name)
	if err := srv.Serve(ctx, ln); err != nil {
		return cli.Failure(err)
	}
	parts.Log.Info("sluice: ingest api stopped")
	return nil
}

// newIngestProducer returns the producer options for cfg: the queue's
// limits, and the HTTP sink's bounds on a job's own request.
func newIngestProducer(cfg *config.Config) ([]producer.Option, error) {
	opts := []producer.Option{producer.WithMaxPayloadBytes(cfg.Queue.MaxPayloadBytes), producer.WithMaxCost(cfg.Queue.MaxCost)}
	if cfg.Sink.Type == config.SinkHTTP {
		b, err := sink.NewBounds(cfg.HTTPSinkConfig())
		if err != nil {
			return nil, err
		}
		opts = append(opts, producer.WithJobCheck(b.Check))
	}
	return opts, nil
}

// rateOf reads the pacer's state and the live replicas for the status.
func rateOf(parts *replica.Parts) func(context.Context) (*api.RateStatus, error) {
	return func(ctx context.Context) (*api.RateStatus, error) {
		st, err := parts.Pacer.Controls().State(ctx)
		if err != nil {
			return nil, err
		}
		reps, err := parts.Pacer.Members().Replicas(ctx, replica.LiveWindow)
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
