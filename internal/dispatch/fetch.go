package dispatch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
)

// fetchLoop keeps lane i stocked with up to its target of jobs, fetching
// only when the lane runs low, until ctx ends.
func (e *Engine) fetchLoop(ctx context.Context, i int) {
	name := e.buf.names[i]
	lowest := i == len(e.buf.names)-1
	var failures backoff
	for {
		if e.standAside(ctx) {
			if sleep(ctx, asidePoll) != nil {
				return
			}
			continue
		}
		replicas := int(e.replicas.Load())
		want, err := e.buf.waitForRoom(ctx, i, e.cfg.laneTarget(lowest, replicas, e.sendRate()))
		if err != nil {
			return
		}
		ds, err := e.q.Fetch(ctx, name, e.fetchSize(want, replicas))
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, queue.ErrClosed) {
				return
			}
			e.backendError("queue", err)
			if e.retrySleep(ctx, &failures) != nil {
				return
			}
			continue
		}
		failures.ok()
		e.setHealthy("queue")
		e.stock(ctx, i, ds)
		// Let the slot loop, which stock woke, take the job now rather
		// than after this loop has sent its next fetch: an idle replica's
		// job (its slot come with it on a ride) leaves that much sooner
		// (latency p50 at 200/s under cap 500, A/B in three pairs of
		// runs: 0.43–0.48ms before, 0.36–0.40ms after; the ceiling the
		// same).
		runtime.Gosched()
	}
}

// asidePoll is how often a replica standing aside looks again.
const asidePoll = 100 * time.Millisecond

// standAside reports whether the pacer wants this replica to stand aside.
// While it does, it hands every job it holds back to the queue for the
// other replicas and Ready says why; it logs on the way in and out.
func (e *Engine) standAside(ctx context.Context) bool {
	err := e.pacer.Aside()
	if err == nil {
		if e.standing.CompareAndSwap(true, false) {
			e.asideWhy.Store(nil)
			e.log.Info("dispatch: the pacer's clock is precise again; taking slots")
		}
		return false
	}
	e.asideWhy.Store(&err)
	if e.standing.CompareAndSwap(false, true) {
		e.log.Warn("dispatch: standing aside; held jobs go back to the queue for the other replicas", "why", err)
	}
	if ds := e.buf.drain(); len(ds) > 0 {
		e.release(ds)
	}
	return true
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
	if e.tenants != nil {
		fresh = e.deferExcess(ctx, fresh)
	}
	e.buf.stock(i, fresh, now)
}

// keepAlive extends the jobs this replica holds with the queue until ctx
// ends, so that no other replica gets them: those waiting in the lane
// buffer for a slot, and those whose request is open to the provider (see
// send). A job is extended once a third of the visibility timeout has
// passed since it was fetched or last extended, and at the first round
// after it was put back or its request opened, when that time is not
// known. Rounds come every twelfth of the visibility timeout, so no job
// goes longer than half of it without an extension (plus the time the
// Extend calls take). A job whose Extend failed is tried again at the
// next round, not a third of the timeout later, so that a backend that
// fails for a moment (a failover) costs a round, not the margin.
func (e *Engine) keepAlive(ctx context.Context) {
	every := e.cfg.VisibilityTimeout / 3
	t := time.NewTicker(max(e.cfg.VisibilityTimeout/12, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := e.cfg.Now()
		held, open := e.buf.stale(now, every), e.sending.stale(now, every)
		e.buf.restamp(e.extendAll(ctx, held, every))
		e.sending.restamp(e.extendAll(ctx, open, every))
	}
}

// extendAll extends each of ds (extend) and returns those whose Extend
// failed, for the next round; it reuses ds's room.
func (e *Engine) extendAll(ctx context.Context, ds []due, limit time.Duration) []due {
	failed := ds[:0]
	for _, x := range ds {
		if !e.extend(ctx, x.d, limit) {
			failed = append(failed, x)
		}
	}
	return failed
}

// extend extends one delivery, waiting at most limit: an Extend that takes
// longer is too late for the jobs behind it. An Extend that finds the job
// settled meanwhile is not a backend error. It returns false when the
// Extend failed and is worth trying again.
func (e *Engine) extend(ctx context.Context, d queue.Delivery, limit time.Duration) bool {
	ectx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err := d.Extend(ectx)
	switch {
	case err == nil || ctx.Err() != nil: // keep-alive ended
	case errors.Is(err, queue.ErrSettled):
		e.log.Debug("dispatch: job settled before it could be extended", "job", d.Job().ID, "err", err)
	default:
		e.backendError("queue", fmt.Errorf("dispatch: extend job %s: %w", d.Job().ID, err))
		return false
	}
	return true
}

// pick chooses the job that takes the slot that has just come, by the lane
// policy, and removes it from its lane. It returns false when no lane holds
// a job (with tenant limits: a job the slot allows). Expired jobs met on
// the way are dead-lettered and skipped.
func (e *Engine) pick(ctx context.Context, slot pacer.Slot) (queue.Delivery, bool) {
	now := e.cfg.Now()
	for {
		var d queue.Delivery
		var ok bool
		if e.tenants == nil {
			d, ok = e.buf.pick()
		} else {
			d, ok = e.buf.pickAllowed(func(j *queue.Job) bool { return e.allowed(j, slot) })
		}
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
	if !e.buf.putBack(d) {
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
