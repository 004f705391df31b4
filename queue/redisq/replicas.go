package redisq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated is matched by the error of an Enqueue whose jobs the
// master stored but fewer replicas than WithMinReplicas asks confirmed in
// time. The jobs may or may not survive a failover: retry the enqueue (with
// idempotency keys a retry that finds the jobs stored adds nothing).
var ErrNotReplicated = errors.New("redisq: jobs not confirmed by enough replicas")

// WithMinReplicas makes every Enqueue wait, after each script call that
// stores jobs, until n replicas of the master confirm the write (Redis
// WAIT n timeout, on the connection that ran the script), and fail with
// ErrNotReplicated when fewer do within timeout. An Enqueue that returns
// nil then holds jobs that a failover to one of those replicas keeps.
// n = 0, the default, waits for nothing: Redis replication is
// asynchronous, and a failover may lose the last jobs acknowledged.
// timeout ≤ 0 means 100ms; keep it under the client's read timeout.
//
// It needs a client that talks to the master of the queue's slot on one
// connection: a *redis.Client (single server or Sentinel's failover
// client) or a *redis.ClusterClient; with any other client Enqueue fails.
// Acks, retries and dead-letters do not wait: a failover that loses one
// hands the job out again (a duplicate), never loses it.
func WithMinReplicas(n int, timeout time.Duration) Option {
	return func(q *Queue) {
		q.minReplicas = n
		q.replicaTimeout = timeout
		if timeout <= 0 {
			q.replicaTimeout = 100 * time.Millisecond
		}
	}
}

// runEnqueue runs the enqueue script, and with WithMinReplicas waits for
// the replicas on the same connection.
func (q *Queue) runEnqueue(ctx context.Context, keys []string, args []any) (any, error) {
	if q.minReplicas <= 0 {
		return q.scripts.enqueue.Run(ctx, q.client, keys, args...).Result()
	}
	node, err := q.masterFor(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		var eval *redis.Cmd
		var wait *redis.Cmd
		_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
			eval = p.EvalSha(ctx, q.scripts.enqueue.Hash(), keys, args...)
			wait = p.Do(ctx, "WAIT", q.minReplicas, q.replicaTimeout.Milliseconds())
			return nil
		})
		if err := eval.Err(); err != nil {
			if attempt == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
				if err := q.scripts.enqueue.Load(ctx, node).Err(); err != nil {
					return nil, fmt.Errorf("load script: %w", err)
				}
				continue
			}
			return nil, err
		}
		v := eval.Val()
		got, err := wait.Int64()
		if err != nil {
			return v, fmt.Errorf("%w: wait for %d replicas: %w", ErrNotReplicated, q.minReplicas, err)
		}
		if got < int64(q.minReplicas) {
			return v, fmt.Errorf("%w: %d of %d confirmed them within %s; they are stored on the master but may not survive a failover: retry",
				ErrNotReplicated, got, q.minReplicas, q.replicaTimeout)
		}
		return v, nil
	}
}

// masterFor returns the client of the master that holds key.
func (q *Queue) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := q.client.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("find the master of %s: %w", key, err)
		}
		return node, nil
	default:
		return nil, fmt.Errorf("waiting for replicas needs a *redis.Client or *redis.ClusterClient, got %T", q.client)
	}
}
