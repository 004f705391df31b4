package redisq

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Rider is a command sent right behind a blocking read, in the same
// pipeline on the same connection, so that Redis runs it the moment the
// read returns (a job came, or the block slice ended): the dispatcher
// rides its pacer's call for a slot on the read (pacer.Ride), and an idle
// replica's slot comes with its job instead of one round trip after it.
type Rider interface {
	// Send queues the rider's commands in pipe, behind the read.
	Send(ctx context.Context, pipe redis.Pipeliner)
	// Landed is called once the replies are read, with how many jobs the
	// read brought (0 after an error).
	Landed(jobs int)
}

// WithRider makes each blocking read ask ride for a Rider to send behind
// it; ride returns nil when there is nothing to send. Rides need the
// read and the rider's commands on one connection: they are sent only on a
// client of one server (a redis.Client, with or without Sentinel), and
// only while a block slice is well within the client's read timeout (a
// pipeline waits no longer than that for its replies). Otherwise reads
// block alone.
func WithRider(ride func() Rider) Option { return func(q *Queue) { q.ride = ride } }

// rider returns the Rider for a blocking read of up to d, or nil.
func (q *Queue) rider(d time.Duration) Rider {
	if q.ride == nil {
		return nil
	}
	c, ok := q.client.(*redis.Client)
	if !ok {
		return nil
	}
	if rt := c.Options().ReadTimeout; rt >= 0 && rt < 2*d {
		return nil // -1 and -2: no timeout
	}
	return q.ride()
}

// blockRiding is block's XREADGROUP with r's commands behind it, in one
// pipeline.
func (q *Queue) blockRiding(args *redis.XReadGroupArgs, r Rider) ([]redis.XStream, error) {
	ctx := context.Background() // the reply must be read: see Fetch
	pipe := q.client.Pipeline()
	read := pipe.XReadGroup(ctx, args)
	r.Send(ctx, pipe)
	_, _ = pipe.Exec(ctx) // each command's error is its own
	streams, err := read.Result()
	jobs := 0
	for _, s := range streams {
		jobs += len(s.Messages)
	}
	r.Landed(jobs)
	return streams, err
}
