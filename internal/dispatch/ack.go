package dispatch

import (
	"context"

	"github.com/sluicehq/sluice/queue"
)

// maxAckBatch is the most acks sent in one batch.
const maxAckBatch = 256

// ack acknowledges a delivered job: through the ack loop when the queue
// acks in batches, else at once.
func (e *Engine) ack(ctx context.Context, d queue.Delivery) {
	if e.acks != nil {
		e.acks <- d
		return
	}
	e.settled(d.Job(), "ack", d.Ack(ctx))
}

// ackLoop sends the acks queued on e.acks in batches until the channel is
// closed and drained. It waits for nothing: a batch is whatever queued up
// while the previous one was sent, so a lone ack goes at once and acks
// under load share round trips.
func (e *Engine) ackLoop(ba queue.BatchAcker) {
	batch := make([]queue.Delivery, 0, maxAckBatch)
	for d := range e.acks {
		batch = append(batch[:0], d)
	fill:
		for len(batch) < maxAckBatch {
			select {
			case d, ok := <-e.acks:
				if !ok {
					break fill
				}
				batch = append(batch, d)
			default:
				break fill
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		errs := ba.AckBatch(ctx, batch)
		cancel()
		for i, err := range errs {
			e.settled(batch[i].Job(), "ack", err)
		}
	}
}
