package redisq

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/queue"
)

var _ queue.Deferrer = (*delivery)(nil)

// Defer implements queue.Deferrer with the retry script, passing the
// attempts made before this delivery, so that it counts none.
func (d *delivery) Defer(ctx context.Context, delay time.Duration) error {
	body, err := d.encode(d.job.LastError)
	if err != nil {
		return fmt.Errorf("redisq: defer: %w", err)
	}
	keys := []string{d.q.keys.lane(d.lane), d.q.keys.delayed(d.lane)}
	return d.settle(ctx, "defer", func() (any, error) {
		return d.q.scripts.retry.Run(ctx, d.q.client, keys, group, d.q.cfg.Consumer, d.entry, d.deliveries,
			delay.Milliseconds(), d.job.Attempt-1, d.job.ID, token(), body).Result()
	})
}
