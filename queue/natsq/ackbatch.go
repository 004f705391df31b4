package natsq

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
// confirmed.
func (q *Queue) ackClaimed(ctx context.Context, claimed []*delivery, n int, errs []error) {
	nc := q.js.Conn()
	inbox := nats.NewInbox()
	replies := make(chan *nats.Msg, n)
	sub, err := nc.ChanSubscribe(inbox+".*", replies)
	if err != nil {
		fail(claimed, errs, err)
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	pending := make(map[int]bool, n)
	for i, d := range claimed {
		if d == nil {
			continue
		}
		if err := nc.PublishRequest(d.msg.Reply(), inbox+"."+strconv.Itoa(i), ackBody); err != nil {
			errs[i] = fmt.Errorf("natsq: ack %s: %w", d.job.ID, err)
			continue
		}
		pending[i] = true
	}
	for len(pending) > 0 {
		select {
		case m := <-replies:
			i, err := strconv.Atoi(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
			if err == nil && pending[i] {
				delete(pending, i)
				if m.Header.Get("Status") != "" {
					// A status reply (no responders) is no confirmation.
					errs[i] = fmt.Errorf("natsq: ack %s: %w", claimed[i].job.ID, nats.ErrNoResponders)
				}
			}
		case <-ctx.Done():
			for i := range pending {
				errs[i] = fmt.Errorf("natsq: ack %s: %w", claimed[i].job.ID, ctx.Err())
			}
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
