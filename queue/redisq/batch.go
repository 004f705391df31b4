package redisq

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/queue"
)

var (
	_ queue.BatchAcker = (*Queue)(nil)
	_ queue.Releaser   = (*delivery)(nil)
)

// AckBatch implements queue.BatchAcker: one script call per lane acks the
// lane's deliveries. A delivery that is not this queue's, or was settled
// before, gets an error wrapping queue.ErrSettled.
func (q *Queue) AckBatch(ctx context.Context, ds []queue.Delivery) []error {
	errs := make([]error, len(ds))
	byLane := map[string][]int{}
	for i, d := range ds {
		rd, ok := d.(*delivery)
		if !ok || rd.q != q || rd.done.Load() {
			errs[i] = fmt.Errorf("redisq: ack: %w", queue.ErrSettled)
			continue
		}
		byLane[rd.lane] = append(byLane[rd.lane], i)
	}
	for lane, idx := range byLane {
		q.ackLane(ctx, lane, ds, idx, errs)
	}
	return errs
}

// ackLane acks the deliveries ds[idx...] of one lane in one script call.
func (q *Queue) ackLane(ctx context.Context, lane string, ds []queue.Delivery, idx []int, errs []error) {
	args := []any{group, q.cfg.Consumer}
	for _, i := range idx {
		d := ds[i].(*delivery)
		args = append(args, d.entry, d.deliveries)
	}
	v, err := q.scripts.ackBatch.Run(ctx, q.client, []string{q.keys.lane(lane)}, args...).Result()
	res, ok := v.([]any)
	if err == nil && (!ok || len(res) != len(idx)) {
		err = fmt.Errorf("%w: ack batch of %d got %T %v", errReply, len(idx), v, v)
	}
	for k, i := range idx {
		d := ds[i].(*delivery)
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("redisq: ack: %w", err)
		case res[k] == int64(1):
			d.done.Store(true)
		default:
			d.done.Store(true)
			errs[i] = fmt.Errorf("redisq: ack: %w", queue.ErrSettled)
		}
	}
}

// Release implements queue.Releaser: the entry goes back to its lane at
// once, claimed by the next fetch of any consumer, without counting an
// attempt.
func (d *delivery) Release(ctx context.Context) error {
	return d.settle(ctx, "release", func() (any, error) {
		return d.q.scripts.release.Run(ctx, d.q.client, []string{d.q.keys.lane(d.lane)},
			group, d.q.cfg.Consumer, d.entry, d.deliveries, d.q.cfg.VisibilityTimeout.Milliseconds()).Result()
	})
}
