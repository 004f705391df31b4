package natsq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sluicehq/sluice/queue"
)

// Fetch implements queue.Consumer. It first asks the lane's consumer for
// up to n messages without waiting; when none is there it sends blocking
// pull requests for one message (each bounded by 5s, and cancelled with
// ctx) and returns that message as soon as it comes. No busy polling: an
// idle Fetch sends one pull request per 5s.
//
// A job's Attempt is the attempts it had before its current message (in the
// body) plus the message's delivery count (NumDelivered), so a redelivery
// after a visibility timeout counts. A message whose attempt would exceed
// MaxAttempts is dead-lettered here, not returned. The first call also
// starts the queue's mover of delayed jobs (see the package documentation).
func (q *Queue) Fetch(ctx context.Context, lane string, n int) ([]queue.Delivery, error) {
	cons, ok := q.lanes[lane]
	if !ok {
		return nil, fmt.Errorf("natsq: fetch: %w: %q", queue.ErrUnknownLane, lane)
	}
	if q.closed() {
		return nil, fmt.Errorf("natsq: fetch: %w", queue.ErrClosed)
	}
	n = max(n, 1)
	q.startMover()
	fctx, stop := q.bind(ctx)
	defer stop()
	for {
		msgs, err := pull(fctx, cons, n)
		if len(msgs) > 0 {
			if ds := q.deliveries(ctx, lane, msgs); len(ds) > 0 {
				return ds, nil
			}
			continue
		}
		switch {
		case q.closed():
			return nil, fmt.Errorf("natsq: fetch: %w", queue.ErrClosed)
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			return nil, fmt.Errorf("natsq: fetch %s: %w", lane, err)
		}
	}
}

// received is a message and a time no earlier than when the server
// delivered it (see drain).
type received struct {
	msg jetstream.Msg
	at  time.Time
}

// pull returns at least one and at most n messages of cons, or an error.
// The error is ctx's when ctx ended; a pull request that expires empty is
// not an error, another is sent. Messages already received when ctx ends
// are returned, not dropped.
func pull(ctx context.Context, cons jetstream.Consumer, n int) ([]received, error) {
	msgs, err := drainNoWait(cons, n)
	if len(msgs) > 0 || err != nil {
		return msgs, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		msgs, err := waitOne(ctx, cons)
		switch {
		case len(msgs) > 0:
			// The first job after an idle spell goes out at once: asking
			// for more would cost it a round trip, and under load the
			// request without waiting above returns many.
			return msgs, nil
		case err != nil:
			return nil, err
		case time.Since(start) < minRound:
			// An empty answer sooner than a pull request should end:
			// never spin on it.
			sleepCtx(ctx, minRound)
		}
	}
}

// minRound is the least time between two blocking pull requests of pull.
const minRound = 50 * time.Millisecond

// waitOne sends one blocking pull request for one message, ended by ctx or
// after pullWait. A request that ends empty is not an error.
func waitOne(ctx context.Context, cons jetstream.Consumer) ([]received, error) {
	wctx, cancel := context.WithTimeout(ctx, pullWait)
	defer cancel()
	if dl, _ := wctx.Deadline(); time.Until(dl) < time.Millisecond {
		// FetchContext refuses a deadline already reached; the context's
		// own timer is about to fire.
		<-wctx.Done()
		return nil, nil
	}
	b, err := cons.Fetch(1, jetstream.FetchContext(wctx))
	msgs, err := drain(b, err, time.Time{})
	if wctx.Err() != nil {
		err = nil
	}
	return msgs, err
}

// drainNoWait asks for up to n messages available now.
func drainNoWait(cons jetstream.Consumer, n int) ([]received, error) {
	sent := time.Now()
	b, err := cons.FetchNoWait(n)
	return drain(b, err, sent)
}

// drain reads a whole batch. Each message is stamped with sent, the time
// its pull request was sent (the server delivered it later), or when zero
// with the time it was read (for a blocking request, sent long before).
func drain(b jetstream.MessageBatch, err error, sent time.Time) ([]received, error) {
	if err != nil {
		return nil, err
	}
	var msgs []received
	for m := range b.Messages() {
		at := sent
		if at.IsZero() {
			at = time.Now()
		}
		msgs = append(msgs, received{msg: m, at: at})
	}
	return msgs, b.Error()
}

// deliveries turns fetched messages into deliveries, dead-lettering those
// out of attempts or unreadable.
func (q *Queue) deliveries(ctx context.Context, lane string, msgs []received) []queue.Delivery {
	ds := make([]queue.Delivery, 0, len(msgs))
	for _, r := range msgs {
		d, reason := q.newDelivery(ctx, lane, r)
		if reason == "" {
			ds = append(ds, d)
			continue
		}
		sctx, cancel := detach(ctx)
		err := q.deadLetter(sctx, d, reason)
		cancel()
		if err != nil {
			// Left in flight: it comes back after the visibility timeout
			// and is dead-lettered then.
			q.log.Warn("natsq: dead-letter on fetch", "queue", q.cfg.Name, "lane", lane, "job", d.job.ID, "err", err)
		}
	}
	return ds
}

// newDelivery reads one message. A non-empty reason says why the message
// must be dead-lettered instead of delivered.
func (q *Queue) newDelivery(ctx context.Context, lane string, r received) (*delivery, string) {
	d := &delivery{q: q, msg: r.msg, deadline: q.deadline(r.at)}
	md, err := r.msg.Metadata()
	if err != nil {
		d.job = unreadable(queue.NewID(), lane, r.msg.Data())
		return d, fmt.Sprintf("unreadable message: %v", err)
	}
	d.seq, d.stored = md.Sequence.Stream, md.Timestamp
	if err := json.Unmarshal(r.msg.Data(), &d.job); err != nil {
		d.job = unreadable(fmt.Sprintf("unreadable-%d", d.seq), lane, r.msg.Data())
		return d, fmt.Sprintf("unreadable job (stream sequence %d): %v", d.seq, err)
	}
	d.job.Lane = lane
	if md.NumDelivered > 1 { // delivered before: some of those may have been releases
		d.released = min(q.releaseCount(ctx, d.seq, d.stored), int(md.NumDelivered)-1)
	}
	base := d.job.Attempt
	d.job.Attempt = base + int(md.NumDelivered) - d.released
	if d.job.Attempt > q.cfg.MaxAttempts {
		d.job.Attempt-- // the last attempt a consumer had
		return d, fmt.Sprintf("max attempts: visibility timeout expired on every attempt (%d of %d)",
			d.job.Attempt, q.cfg.MaxAttempts)
	}
	return d, ""
}

// unreadable wraps a message that is not a job, so that it can be kept as a
// dead letter: its body becomes the payload (as a JSON string when it is
// not JSON).
func unreadable(id, lane string, data []byte) queue.Job {
	payload := json.RawMessage(data)
	if !json.Valid(data) {
		payload, _ = json.Marshal(string(data))
	}
	return queue.Job{ID: id, Lane: lane, Payload: payload}
}
