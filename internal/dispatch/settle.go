package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// settleTimeout bounds one ack, retry or dead-lettering.
const settleTimeout = 10 * time.Second

// Outcomes of a job, as metric labels.
const (
	outDelivered = "delivered"
	outRetried   = "retried"
	outDead      = "dead_lettered"
	outExpired   = "expired"
	outThrottled = "throttled"
)

// send delivers one job and settles it by the provider's answer: delivered
// → ack; throttled → the whole cluster holds back and the job goes back to
// the front of its lane; permanent → dead letter with the answer;
// transient → retry after backoff (dead letter when out of attempts).
func (e *Engine) send(ctx context.Context, d queue.Delivery) {
	j := d.Job()
	e.metrics.sent(j, e.cfg.Now())
	e.metrics.inFlight(1)
	e.open.Add(1)
	start := e.cfg.Now()
	err := e.sink.Send(ctx, j)
	e.open.Add(-1)
	e.metrics.inFlight(-1)
	e.metrics.providerLatency(e.cfg.Now().Sub(start))

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	switch {
	case err == nil:
		e.metrics.outcome(j.Lane, outDelivered)
		e.ack(sctx, d)
	case errors.Is(err, sink.ErrThrottled):
		e.throttled(sctx, d, err)
	case errors.Is(err, sink.ErrPermanent):
		e.metrics.outcome(j.Lane, outDead)
		e.metrics.dead(j.Lane, "permanent")
		e.log.Warn("dispatch: permanent failure, dead-lettered", "job", j.ID, "lane", j.Lane, "attempt", j.Attempt, "err", sink.LogSafe(err))
		e.settled(j, "dead-letter", d.DeadLetter(sctx, err.Error()))
	default:
		delay := e.cfg.backoff(j.Attempt)
		dead, rerr := d.Retry(sctx, delay, err.Error())
		if dead {
			e.metrics.outcome(j.Lane, outDead)
			e.metrics.dead(j.Lane, "max_attempts")
			e.log.Warn("dispatch: out of attempts, dead-lettered", "job", j.ID, "lane", j.Lane, "attempt", j.Attempt, "err", sink.LogSafe(err))
		} else {
			e.metrics.outcome(j.Lane, outRetried)
			e.log.Info("dispatch: transient failure, retry later", "job", j.ID, "lane", j.Lane, "attempt", j.Attempt, "in", delay, "err", sink.LogSafe(err))
		}
		e.settled(j, "retry", rerr)
	}
}

// throttled makes the whole cluster hold back for the provider's
// Retry-After and puts the job back to go first when slots come again. A
// throttle is the provider's state, not the job's failure: no attempt is
// spent.
func (e *Engine) throttled(ctx context.Context, d queue.Delivery, err error) {
	wait := sink.RetryAfter(err)
	if wait <= 0 {
		wait = e.cfg.DefaultThrottle
	}
	wait = min(wait, e.cfg.MaxThrottle)
	e.metrics.throttle()
	e.metrics.outcome(d.Job().Lane, outThrottled)
	if _, err := e.pacer.Throttle(ctx, wait); err != nil {
		e.backendError("pacer", err)
	}
	e.log.Info("dispatch: provider throttled, cluster holds back", "for", wait, "err", sink.LogSafe(err))
	e.putBack(d)
}

// expire dead-letters a job past its ExpiresAt before it spends a slot.
func (e *Engine) expire(ctx context.Context, d queue.Delivery) {
	j := d.Job()
	e.metrics.outcome(j.Lane, outExpired)
	e.metrics.dead(j.Lane, "expired")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	reason := "expired at " + j.ExpiresAt.UTC().Format(time.RFC3339)
	e.settled(j, "dead-letter", d.DeadLetter(sctx, reason))
}

// release gives jobs held unsent back to the queue at shutdown. A backend
// that cannot release leaves them to come back after the visibility
// timeout; either way they are not lost and were never sent.
func (e *Engine) release(ds []queue.Delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	for _, d := range ds {
		if r, ok := d.(queue.Releaser); ok {
			e.settled(d.Job(), "release", r.Release(ctx))
		}
	}
	if len(ds) > 0 {
		e.log.Info("dispatch: released unsent jobs", "count", len(ds))
	}
}

// settled records a failed settlement: the job will come back after the
// visibility timeout, and may be sent twice.
func (e *Engine) settled(j *queue.Job, op string, err error) {
	if err == nil {
		return
	}
	e.backendError("queue", err)
	e.log.Error("dispatch: could not settle job; it will be delivered again", "op", op, "job", j.ID, "lane", j.Lane, "err", err)
}
