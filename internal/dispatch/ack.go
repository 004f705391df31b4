package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sluice/queue"
)

const (
	// maxAckBatch is the most acks sent in one batch.
	maxAckBatch = 256
	// ackBatchesInFlight bounds the batches of acks open at once: a batch
	// whose confirmation is lost (its server died) holds up only itself.
	ackBatchesInFlight = 4
	// ackStall is how long a batch may be open before the next opens
	// beside it: while the backend answers, one batch at a time, so that
	// acks queue up for the next and share its round trip (a script call
	// per batch on Redis); when an answer is slow (a failover), the next
	// batches go without waiting for it.
	ackStall = 20 * time.Millisecond
	// ackLinger and ackLingerFrom: while acks come in batches of
	// ackLingerFrom or more (a replica busy enough that several finish
	// within one round trip), a batch opens no sooner than ackLinger after
	// the last one, so that each carries more acks: fewer script calls on
	// Redis, fewer writes and confirmation waits on NATS. An ack waits at
	// most ackLinger longer; a replica killed meanwhile leaves that much
	// more of its sent jobs to be delivered again, as any unacked job is.
	// Lone acks and small batches (light load) go at once, as before.
	ackLinger     = 10 * time.Millisecond
	ackLingerFrom = 4
	// ackTimeout bounds one attempt of a batch: how long its confirmations
	// are waited for.
	ackTimeout = 2 * time.Second
	// ackRetryFor is how long an ack that failed for a reason that may
	// pass (the backend unreachable, a failover under way, a confirmation
	// lost with the server that was to send it) is sent again: longer than
	// a Redis or NATS failover takes. A job's visibility timeout may pass
	// first (it may be as short as 100ms, and a job is not kept alive once
	// sent): the job may then be delivered again, as any job whose holder
	// went quiet is, and the ack that comes through after that finds it no
	// longer this replica's (queue.ErrSettled) and leaves it to its new
	// holder: the queues check the holder on every ack.
	ackRetryFor = 15 * time.Second
)

// ack acknowledges a delivered job: through the ack loop when the queue
// acks in batches, else at once, bounded by settleTimeout even when ctx
// has ended.
func (e *Engine) ack(ctx context.Context, d queue.Delivery) {
	if e.acks != nil {
		e.acks <- d
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	e.settled(d.Job(), "ack", d.Ack(actx))
}

// ackLoop sends the acks queued on e.acks in batches until the channel is
// closed and drained, and returns when every batch is settled. A batch is
// whatever queued up while the previous one was sent: a lone ack goes at
// once, and acks under load share round trips. A second batch opens beside
// one that has been open for ackStall, up to ackBatchesInFlight at once.
// After a batch of ackLingerFrom acks or more, the next opens no sooner
// than ackLinger after it.
func (e *Engine) ackLoop(ba queue.BatchAcker) {
	finished := make(chan struct{}, ackBatchesInFlight)
	open := 0
	var opened time.Time // when the last batch opened
	last := 0            // acks in the last batch
	var wg sync.WaitGroup
	for d := range e.acks {
		open -= drained(finished)
		if open > 0 {
			if wait := e.ackStall - time.Since(opened); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-finished:
					open--
				case <-t.C:
				}
				t.Stop()
			}
		}
		for ; open >= ackBatchesInFlight; open-- {
			<-finished
		}
		batch := make([]queue.Delivery, 1, min(maxAckBatch, 1+len(e.acks)))
		batch[0] = d
		var wait time.Duration // after a big batch, how long this one waits for more
		if last >= ackLingerFrom {
			wait = e.ackLinger - time.Since(opened)
		}
		batch = e.fill(batch, wait)
		open++
		opened, last = time.Now(), len(batch)
		wg.Go(func() {
			defer func() { finished <- struct{}{} }()
			e.ackBatch(ba, batch)
		})
	}
	wg.Wait()
}

// fill adds to batch the acks queued on e.acks and, for wait (none when
// wait <= 0), those that come, up to maxAckBatch or until e.acks is
// closed. It takes acks as they come, so that no sender waits for room on
// e.acks meanwhile.
func (e *Engine) fill(batch []queue.Delivery, wait time.Duration) []queue.Delivery {
	var until <-chan time.Time // nil: take only what is queued
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		until = t.C
	}
	for len(batch) < maxAckBatch {
		select {
		case d, ok := <-e.acks:
			if !ok {
				return batch
			}
			batch = append(batch, d)
			continue
		default:
		}
		if until == nil {
			return batch
		}
		select {
		case d, ok := <-e.acks:
			if !ok {
				return batch
			}
			batch = append(batch, d)
		case <-until:
			until = nil // what queued meanwhile still goes
		}
	}
	return batch
}

// drained takes every signal waiting on ch and returns how many.
func drained(ch chan struct{}) int {
	n := 0
	for {
		select {
		case <-ch:
			n++
		default:
			return n
		}
	}
}

// ackBatch acks batch, and sends the acks that failed for a reason that
// may pass again, with backoff, for up to ackRetryFor: a job whose ack is
// lost in a failover is otherwise delivered twice. An ack the queue
// refuses as settled (queue.ErrSettled: the job was redelivered, or
// settled before) is not sent again.
func (e *Engine) ackBatch(ba queue.BatchAcker, batch []queue.Delivery) {
	start := time.Now()
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
		e.metrics.ackBatch()
		errs := ba.AckBatch(ctx, batch)
		cancel()
		again := batch[:0:0]
		var last error
		for i, err := range errs {
			switch {
			case err == nil:
			case errors.Is(err, queue.ErrSettled) || time.Since(start)+backoff > ackRetryFor:
				e.settled(batch[i].Job(), "ack", err)
			default:
				again = append(again, batch[i])
				last = err
			}
		}
		if len(again) == 0 {
			return
		}
		e.backendError("queue", last)
		e.log.Warn("dispatch: acks not confirmed; sending them again", "jobs", len(again), "in", backoff, "err", last)
		time.Sleep(backoff) // the backend is away or failing over: give it time
		backoff = min(2*backoff, 2*time.Second)
		batch = again
	}
}
