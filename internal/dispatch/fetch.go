package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// fetchLoop keeps lane i stocked with up to its target of jobs, fetching
// only when the lane runs low, until ctx ends.
func (e *Engine) fetchLoop(ctx context.Context, i int) {
	name := e.buf.names[i]
	lowest := i == len(e.buf.names)-1
	failures := 0
	for {
		replicas := int(e.replicas.Load())
		want, err := e.buf.waitForRoom(ctx, i, e.cfg.laneTarget(lowest, replicas, e.sendRate()))
		if err != nil {
			return
		}
		ds, err := e.q.Fetch(ctx, name, min(want, e.cfg.fetchChunk(replicas)))
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, queue.ErrClosed) {
				return
			}
			failures++
			e.backendError("queue", err)
			if sleep(ctx, e.retryDelay(failures)) != nil {
				return
			}
			continue
		}
		failures = 0
		e.setHealthy("queue")
		e.stock(ctx, i, ds)
	}
}

// stock adds fetched deliveries to lane i, dead-lettering expired jobs
// before they can spend a slot.
func (e *Engine) stock(ctx context.Context, i int, ds []queue.Delivery) {
	now := e.cfg.Now()
	fresh := ds[:0]
	for _, d := range ds {
		if d.Job().Expired(now) {
			e.expire(ctx, d)
			continue
		}
		fresh = append(fresh, d)
	}
	e.buf.stock(i, fresh, now)
}

// keepAlive extends jobs held longer than a third of the visibility
// timeout, so that no other replica gets them while they wait for a slot.
func (e *Engine) keepAlive(ctx context.Context) {
	every := e.cfg.VisibilityTimeout / 3
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, d := range e.buf.stale(e.cfg.Now(), every) {
			if err := d.Extend(ctx); err != nil && ctx.Err() == nil {
				e.backendError("queue", err)
			}
		}
	}
}

// pick chooses the job that takes the slot that has just come, by the lane
// policy, and removes it from its lane. It returns false when no lane holds
// a job. Expired jobs met on the way are dead-lettered and skipped.
func (e *Engine) pick(ctx context.Context) (queue.Delivery, bool) {
	now := e.cfg.Now()
	for {
		d, ok := e.buf.pick()
		if !ok {
			return nil, false
		}
		if d.Job().Expired(now) {
			e.expire(ctx, d)
			continue
		}
		return d, true
	}
}

// putBack returns a delivery to the front of its lane (after a throttling
// answer, or when its slot could not be had or was too late), so it goes
// next. A job of a lane this engine does not hold is released.
func (e *Engine) putBack(d queue.Delivery) {
	if !e.buf.putBack(d, e.cfg.Now()) {
		e.release([]queue.Delivery{d})
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// noteLatency folds one answer time into the moving average (weight 1/8).
func (e *Engine) noteLatency(d time.Duration) {
	old := e.latency.Load()
	if old == 0 {
		e.latency.Store(int64(d))
		return
	}
	e.latency.Store(old + (int64(d)-old)/8)
}

// sendRate is the most requests per second this replica can have answered:
// MaxInFlight over the provider's answer time; 0 before any answer.
func (e *Engine) sendRate() float64 {
	l := time.Duration(e.latency.Load())
	if l <= 0 {
		return 0
	}
	return float64(e.cfg.MaxInFlight) / l.Seconds()
}
