package natsq

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/sluicehq/sluice/queue"
)

var _ queue.BatchAcker = (*Queue)(nil)

// ackBody is the body of an ack (jetstream.AckAck).
var ackBody = []byte("+ACK")

// AckBatch implements queue.BatchAcker. Every ack of the batch is sent at
// once, each as a request with its own reply subject under one inbox, and
// AckBatch returns when the server has confirmed each, as Ack confirms
// one, or when ctx ends: the batch waits one round trip instead of one per
// job. A delivery that is not this queue's, was settled before, or is past
// its deadline gets an error wrapping queue.ErrSettled; an ack the server
// did not confirm gets an error and may be sent again.
func (q *Queue) AckBatch(ctx context.Context, ds []queue.Delivery) []error {
	errs := make([]error, len(ds))
	claimed := make([]*delivery, len(ds))
	n := 0
	for i, qd := range ds {
		d, ok := qd.(*delivery)
		if !ok || d.q != q {
			errs[i] = fmt.Errorf("natsq: ack: %w", queue.ErrSettled)
			continue
		}
		if errs[i] = d.begin(); errs[i] == nil {
			claimed[i] = d
			n++
		}
	}
	if n > 0 {
		q.ackClaimed(ctx, claimed, n, errs)
	}
	for i, d := range claimed {
		if d != nil {
			d.end(errs[i])
		}
	}
	return errs
}

// ackClaimed sends the acks of the n non-nil deliveries of claimed and
// waits for their confirmations; errs[i] is set for each ack not
// confirmed. The confirmations come on the queue's shared subscription
// (ackReplies), or after Close on one opened for the batch alone.
func (q *Queue) ackClaimed(ctx context.Context, claimed []*delivery, n int, errs []error) {
	nc := q.js.Conn()
	replies := make(chan ackConfirm, n)
	acks := &q.acks
	shared, err := acks.acquire(nc)
	if err == nil && !shared { // after Close: a subscription of the batch's own
		acks = &ackReplies{}
		_, err = acks.acquire(nc)
		defer acks.close() // after release: unsubscribes
	}
	if err != nil {
		fail(claimed, errs, err)
		return
	}
	defer acks.release()
	pending := make(map[int]string, n)
	for i, d := range claimed {
		if d == nil {
			continue
		}
		reply := acks.expect(replies, i)
		if err := nc.PublishRequest(d.msg.Reply(), reply, ackBody); err != nil {
			errs[i] = fmt.Errorf("natsq: ack %s: %w", d.job.ID, err)
			acks.forget([]string{reply})
			continue
		}
		pending[i] = reply
	}
	for len(pending) > 0 {
		select {
		case c := <-replies:
			if _, ok := pending[c.i]; ok {
				delete(pending, c.i)
				if c.msg.Header.Get("Status") != "" {
					// A status reply (no responders) is no confirmation.
					errs[c.i] = fmt.Errorf("natsq: ack %s: %w", claimed[c.i].job.ID, nats.ErrNoResponders)
				}
			}
		case <-ctx.Done():
			left := make([]string, 0, len(pending))
			for i, reply := range pending {
				errs[i] = fmt.Errorf("natsq: ack %s: %w", claimed[i].job.ID, ctx.Err())
				left = append(left, reply)
			}
			acks.forget(left)
			return
		}
	}
}

// fail sets err on every claimed delivery's slot in errs.
func fail(claimed []*delivery, errs []error, err error) {
	for i, d := range claimed {
		if d != nil {
			errs[i] = fmt.Errorf("natsq: ack %s: %w", d.job.ID, err)
		}
	}
}
