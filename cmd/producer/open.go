package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sluicehq/sluice/internal/backend"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// session is the configuration, the queue and the producer on it.
type session struct {
	cfg     *config.Config
	log     *slog.Logger
	p       *producer.Producer
	closers []func() error // run in order by close
}

// open opens the queue of cfg's backend and a producer on it. Unlike the
// dispatcher it needs no pacer: with backend nats, Redis is not used.
func (g *globals) open(ctx context.Context, cfg *config.Config) (*session, error) {
	log, err := g.logger()
	if err != nil {
		return nil, err
	}
	s := &session{cfg: cfg, log: log}
	q, err := s.openQueue(ctx)
	if err != nil {
		_ = s.close()
		return nil, failure(err)
	}
	s.p, err = newProducer(q, cfg)
	if err != nil {
		_ = s.close()
		return nil, failure(err)
	}
	log.Debug("producer: queue open", "queue", cfg.Queue.Name, "backend", cfg.Queue.Backend, "lanes", s.p.Lanes())
	return s, nil
}

// openQueue opens the queue of cfg's backend. It dials only what that
// backend needs: with backend nats, Redis is not used.
func (s *session) openQueue(ctx context.Context) (queue.Queue, error) {
	q, closeQueue, err := backend.Open(ctx, s.cfg, backend.Options{Log: s.log})
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, closeQueue)
	return q, nil
}

// close closes the queue, then the connection Open dialed for it.
func (s *session) close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// newProducer returns a producer on q with the lanes and limits of cfg,
// and, when the configuration has the HTTP sink's URL, its bounds on a
// job's own request, so that a job the dispatchers would not send is
// refused at enqueue.
func newProducer(q queue.Enqueuer, cfg *config.Config) (*producer.Producer, error) {
	opts := []producer.Option{producer.WithMaxPayloadBytes(cfg.Queue.MaxPayloadBytes), producer.WithMaxCost(cfg.Queue.MaxCost)}
	if cfg.Sink.Type == config.SinkHTTP && cfg.Sink.URL != "" {
		b, err := sink.NewBounds(cfg.HTTPSinkConfig())
		if err != nil {
			return nil, err
		}
		opts = append(opts, producer.WithJobCheck(b.Check))
	}
	return producer.New(q, cfg.PriorityConfig(), opts...)
}

// checker returns a producer that checks jobs against cfg before any
// connection is made; it cannot enqueue.
func checker(cfg *config.Config) (*producer.Producer, error) {
	p, err := newProducer(unopened{}, cfg)
	if err != nil {
		return nil, cli.Usage(err)
	}
	return p, nil
}

// unopened is the queue of a checker.
type unopened struct{}

func (unopened) Enqueue(context.Context, ...*queue.Job) ([]queue.EnqueueResult, error) {
	return nil, errors.New("queue not open")
}
