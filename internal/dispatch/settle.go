package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/pacer"
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
	outReleased  = "released"
)

// errShutdown is the cause with which Run cancels the requests still open
// when ShutdownTimeout has passed.
var errShutdown = errors.New("dispatch: shutdown timeout passed before the provider answered")

// send delivers one job on slot and settles it by the provider's answer:
// delivered → ack; throttled → the whole cluster holds back and the job
// goes back to the front of its lane; permanent → dead letter with the
// answer; transient → retry after backoff (dead letter when out of
// attempts); cancelled by shutdown before an answer → handed back, no
// attempt spent (handBack). When the sink's gate finds the slot past its deadline, nothing
// was sent: the slot is forfeited and the job goes back to the front of its
// lane.
func (e *Engine) send(ctx context.Context, d queue.Delivery, slot pacer.Slot) {
	defer e.sending.remove(e.sending.add(d)) // kept alive until settled: see keepAlive
	j := d.Job()
	e.metrics.inFlight(1)
	e.open.Add(1)
	start := e.cfg.Now()
	var left leftAt
	sctx := sink.WithGate(ctx, e.onTime(slot, &left))
	if e.ahead > 0 {
		sctx = sink.WithHold(sctx, e.hold(ctx, slot))
	}
	err := e.sink.Send(sctx, j)
	e.open.Add(-1)
	e.metrics.inFlight(-1)
	if errors.Is(err, sink.ErrLate) {
		e.late(d, slot)
		return
	}
	if !sink.NotSent(err) { // a request whose connection never opened is not counted as sent
		out := start // a sink that runs no gate: the send began at start
		if late, ok := left.get(); ok {
			e.metrics.lateness(late)
			out = slot.At.Add(late)
		}
		e.sent.add(j.Lane)
		e.metrics.sent(j, out)
		// The provider's time runs from when the request left, not from
		// the wait for its slot before it (sink.Holder).
		took := e.cfg.Now().Sub(out)
		e.metrics.providerLatency(took)
		e.noteLatency(took)
	}
	e.observe(err)

	if err == nil {
		e.metrics.outcome(j.Lane, outDelivered)
		e.ack(ctx, d) // with its own bounds
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	switch {
	case errors.Is(err, sink.ErrThrottled):
		e.throttled(sctx, d, err)
	case errors.Is(err, sink.ErrPermanent):
		e.metrics.outcome(j.Lane, outDead)
		e.metrics.dead(j.Lane, "permanent")
		e.log.Warn("dispatch: permanent failure, dead-lettered", "job", j.ID, "lane", j.Lane, "attempt", j.Attempt, "err", sink.LogSafe(err))
		e.settled(j, "dead-letter", d.DeadLetter(sctx, err.Error()))
	case cancelledByShutdown(ctx, err):
		e.handBack(sctx, d, err)
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

// cancelledByShutdown reports whether a request failed with err because
// the engine's own shutdown cancelled it (ctx, the send context, ended
// with errShutdown) before the provider answered. A request that timed
// out on its own (the sink's timeout), or that the provider answered, is
// the job's failure; this is not.
func cancelledByShutdown(ctx context.Context, err error) bool {
	if !errors.Is(context.Cause(ctx), errShutdown) {
		return false
	}
	_, answered := errors.AsType[*sink.StatusError](err)
	return !answered
}

// handBack gives back a job whose request the engine's shutdown cancelled
// (cancelledByShutdown): that is no failure of the job, so the engine
// spends no attempt on it and never dead-letters it for it. A delivery
// that can be released (queue.Releaser) goes back to the queue at once
// with no attempt counted, as the jobs a replica held at shutdown do; any
// other stays unacked and comes back after the visibility timeout.
//
// The request may have reached the provider all the same: it was
// cancelled while its answer was awaited, so the job may be delivered
// twice. That is within the at-least-once promise (the Idempotency-Key
// header lets the provider recognise the repeat); dead-lettering a job the
// provider never answered would break another, that a job is dead-lettered
// only when it fails for good or runs out of attempts.
func (e *Engine) handBack(ctx context.Context, d queue.Delivery, err error) {
	j := d.Job()
	e.metrics.outcome(j.Lane, outReleased)
	e.log.Info("dispatch: request cancelled by shutdown before the provider answered; job handed back, no attempt spent",
		"job", j.ID, "lane", j.Lane, "attempt", j.Attempt, "err", sink.LogSafe(err))
	if r, ok := d.(queue.Releaser); ok {
		e.settled(j, "release", r.Release(ctx))
	}
}

// onTime returns the gate for sending on slot, which the sink runs right
// before it writes the request (perhaps more than once): it refuses with
// sink.ErrLate once the slot is past its deadline, and otherwise records
// in left how late after the slot the request leaves.
func (e *Engine) onTime(slot pacer.Slot, left *leftAt) func() error {
	return func() error {
		now := e.cfg.Now()
		if slot.Late(now) {
			return sink.ErrLate
		}
		left.set(now.Sub(slot.At))
		return nil
	}
}

// hold returns the wait, for a sink that holds (sink.Holder), until slot
// comes: the sink runs it right before it writes the request, then the
// gate. When ctx ends first, nothing is sent and the slot is forfeited.
func (e *Engine) hold(ctx context.Context, slot pacer.Slot) func() error {
	return func() error {
		if err := e.pacer.Hold(ctx, slot); err != nil {
			return fmt.Errorf("%w: %w", sink.ErrLate, err)
		}
		return nil
	}
}

// leftAt is how late after its slot a request left, as its gate's last
// pass saw it; the gate may run on another goroutine than send's.
type leftAt struct{ ns atomic.Int64 } // lateness + 1, 0 while the gate has not passed

func (l *leftAt) set(late time.Duration) { l.ns.Store(int64(max(late, 0)) + 1) }

// get returns the lateness, false when the gate never passed.
func (l *leftAt) get() (time.Duration, bool) {
	v := l.ns.Load()
	return time.Duration(v - 1), v != 0
}

// late gives up a slot whose request could not leave before its deadline
// and puts the job back at the front of its lane for a later slot. Nothing
// was sent: no attempt is spent, and the job is neither acked nor retried.
func (e *Engine) late(d queue.Delivery, slot pacer.Slot) {
	e.pacer.Forfeit(slot)
	e.log.Debug("dispatch: slot passed before the request could leave; forfeited, job goes on a later slot",
		"job", d.Job().ID, "lane", d.Job().Lane, "deadline", slot.Deadline)
	e.putBack(d)
}

// observe tells the feedback, when there is one, of the provider's answer
// to a request: an error that is no answer (the request failed on the
// way) is not one.
func (e *Engine) observe(err error) {
	if e.fb == nil {
		return
	}
	switch {
	case err == nil:
		e.fb.Observe(pacer.Answer{})
	case errors.Is(err, sink.ErrThrottled):
		e.fb.Observe(pacer.Answer{Throttled: true, RetryAfter: sink.RetryAfter(err)})
	default:
		if _, ok := errors.AsType[*sink.StatusError](err); ok {
			e.fb.Observe(pacer.Answer{})
		}
	}
}

// throttled puts the job back to go first when slots come again. A
// throttle is the provider's state, not the job's failure: no attempt is
// spent. With a feedback, the answer was reported (observe) and the
// schedule reacts once for the cluster; without, the whole cluster holds
// back for the provider's Retry-After, each time one comes.
func (e *Engine) throttled(ctx context.Context, d queue.Delivery, err error) {
	e.metrics.throttle()
	e.metrics.outcome(d.Job().Lane, outThrottled)
	if e.fb != nil {
		e.log.Debug("dispatch: provider throttled; the job goes first on a later slot", "job", d.Job().ID, "err", sink.LogSafe(err))
		e.putBack(d)
		return
	}
	wait := sink.RetryAfter(err)
	if wait <= 0 {
		wait = e.cfg.DefaultThrottle
	}
	wait = min(wait, e.cfg.MaxThrottle)
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
	if errors.Is(err, queue.ErrSettled) {
		// The queue answered: the delivery was no longer this replica's
		// (its visibility timeout passed, or it was settled already). That
		// is no backend failure: neither readiness nor the backend-error
		// alert should move for it.
		e.log.Warn("dispatch: job no longer this replica's to settle; it is, or will be, delivered again", "op", op, "job", j.ID, "lane", j.Lane, "err", err)
		return
	}
	e.backendError("queue", err)
	e.log.Error("dispatch: could not settle job; it will be delivered again", "op", op, "job", j.ID, "lane", j.Lane, "err", err)
}
