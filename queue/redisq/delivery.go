package redisq

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// delivery is one stream entry fetched by this queue's consumer. It is
// still this consumer's while the entry is pending for the consumer with the
// delivery count it had when fetched; once the visibility timeout passes and
// the entry is claimed again (by any consumer), or once it is settled, every
// settle returns queue.ErrSettled.
type delivery struct {
	q          *Queue
	lane       string
	entry      string // stream entry id
	deliveries int64  // the entry's delivery count when fetched
	job        queue.Job
	raw        string // the entry's undecodable job, when it is one
	done       atomic.Bool
}

var _ queue.Delivery = (*delivery)(nil)

// Job implements queue.Delivery.
func (d *delivery) Job() *queue.Job { return &d.job }

// Ack implements queue.Delivery: the entry is acknowledged and deleted.
func (d *delivery) Ack(ctx context.Context) error {
	return d.settle(ctx, "ack", func() (any, error) {
		return d.q.scripts.ack.Run(ctx, d.q.client, []string{d.q.keys.lane(d.lane)},
			group, d.q.cfg.Consumer, d.entry, d.deliveries).Result()
	})
}

// Retry implements queue.Delivery. On the last attempt the job is
// dead-lettered with the reason "max attempts (N): <reason>".
func (d *delivery) Retry(ctx context.Context, delay time.Duration, reason string) (bool, error) {
	if d.job.Attempt >= d.q.cfg.MaxAttempts {
		err := d.DeadLetter(ctx, fmt.Sprintf("max attempts (%d): %s", d.q.cfg.MaxAttempts, reason))
		return err == nil, err
	}
	body, err := d.encode(reason)
	if err != nil {
		return false, fmt.Errorf("redisq: retry: %w", err)
	}
	keys := []string{d.q.keys.lane(d.lane), d.q.keys.delayed(d.lane)}
	return false, d.settle(ctx, "retry", func() (any, error) {
		return d.q.scripts.retry.Run(ctx, d.q.client, keys, group, d.q.cfg.Consumer, d.entry, d.deliveries,
			delay.Milliseconds(), d.job.Attempt, d.job.ID, token(), body).Result()
	})
}

// DeadLetter implements queue.Delivery.
func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	body := d.raw
	if body == "" {
		b, err := d.encode(reason)
		if err != nil {
			return fmt.Errorf("redisq: dead-letter: %w", err)
		}
		body = string(b)
	}
	keys := []string{d.q.keys.lane(d.lane), d.q.keys.dead(), d.q.keys.deadIndex()}
	return d.settle(ctx, "dead-letter", func() (any, error) {
		return d.q.scripts.deadLetter.Run(ctx, d.q.client, keys, group, d.q.cfg.Consumer, d.entry, d.deliveries,
			d.job.ID, d.lane, d.job.Attempt, reason, body).Result()
	})
}

// Extend implements queue.Delivery: the entry's idle time restarts, without
// counting a delivery.
func (d *delivery) Extend(ctx context.Context) error {
	if d.done.Load() {
		return fmt.Errorf("redisq: extend: %w", queue.ErrSettled)
	}
	v, err := d.q.scripts.extend.Run(ctx, d.q.client, []string{d.q.keys.lane(d.lane)},
		group, d.q.cfg.Consumer, d.entry, d.deliveries).Result()
	if err != nil {
		return fmt.Errorf("redisq: extend: %w", err)
	}
	ok, err := settled(v)
	if err != nil {
		return fmt.Errorf("redisq: extend: %w", err)
	}
	if !ok {
		return fmt.Errorf("redisq: extend: %w", queue.ErrSettled)
	}
	return nil
}

// settle runs one settle script once for the delivery: it returns
// queue.ErrSettled when the delivery was settled before, here or (as the
// script finds) by the queue.
func (d *delivery) settle(ctx context.Context, op string, run func() (any, error)) error {
	if d.done.Load() {
		return fmt.Errorf("redisq: %s: %w", op, queue.ErrSettled)
	}
	v, err := run()
	if err != nil {
		return fmt.Errorf("redisq: %s: %w", op, err)
	}
	ok, err := settled(v)
	if err != nil {
		return fmt.Errorf("redisq: %s: %w", op, err)
	}
	d.done.Store(true)
	if !ok {
		return fmt.Errorf("redisq: %s: %w", op, queue.ErrSettled)
	}
	return nil
}

// encode returns the job as stored: LastError set to reason, Attempt left
// out (the entry carries the attempts made).
func (d *delivery) encode(reason string) ([]byte, error) {
	j := d.job
	j.LastError = reason
	j.Attempt = 0
	return json.Marshal(&j)
}
