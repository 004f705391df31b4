package natsq

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/queue"
)

var _ queue.Deferrer = (*delivery)(nil)

// Defer implements queue.Deferrer as Retry does, publishing the job again
// (to its delayed subject when delay is positive) with one attempt less in
// its body, so that its next delivery has the same Attempt, then acking
// this message.
func (d *delivery) Defer(ctx context.Context, delay time.Duration) error {
	if err := d.begin(); err != nil {
		return err
	}
	err := d.deferJob(ctx, delay)
	d.end(err)
	return err
}

func (d *delivery) deferJob(ctx context.Context, delay time.Duration) error {
	j := d.job
	j.Attempt = max(j.Attempt-1, 0)
	return d.republish(ctx, "defer", "f", j, delay)
}
