package natsq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sluicehq/sluice/queue"
)

// asyncWindow bounds the publishes of one batch awaiting their acks.
const asyncWindow = 256

// Enqueue implements queue.Enqueuer. Each job is one message whose body is
// the job's JSON: on its lane's ready subject, or on its lane's delayed
// subject when NotBefore is after now. A job with a Key carries the
// Nats-Msg-Id "k:" + base64url(sha256(key)), so the stream stores it once
// within the dedup window and answers a repeat with PubAck.Duplicate. A
// batch is published asynchronously (at most 256 awaiting acks at once) and
// a single job synchronously.
//
// When ctx ends, no more messages are published, but the acks of those
// already published are still awaited, for up to 5s more. On an error the
// results returned are those of the jobs before the first one that was not
// published or not acknowledged, in order: each of them is stored (or was
// a duplicate). The jobs after them may be stored too (a message published
// after a failed one is acknowledged, or its ack was lost).
//
// The id returned for a duplicate is the first job's while that job's
// message is still in its lane (waiting or in flight); once the first job
// was acked, moved or retried, it is the id this call gave
// (queuetest.Features.OriginalIDOnDuplicate is false).
func (q *Queue) Enqueue(ctx context.Context, jobs ...*queue.Job) ([]queue.EnqueueResult, error) {
	if q.closed() {
		return nil, fmt.Errorf("natsq: enqueue: %w", queue.ErrClosed)
	}
	now := q.cfg.Now()
	if err := queue.Prepare(&q.cfg, now, jobs); err != nil {
		return nil, fmt.Errorf("natsq: enqueue: %w", err)
	}
	msgs := make([]*nats.Msg, len(jobs))
	for i, j := range jobs {
		m, err := q.jobMsg(j, now)
		if err != nil {
			return nil, fmt.Errorf("natsq: enqueue: job %d: %w", i, err)
		}
		msgs[i] = m
	}
	late, stop := ackContext(ctx)
	defer stop()
	acks, err := q.publishAll(ctx, late, msgs)
	res := make([]queue.EnqueueResult, len(acks))
	for i, a := range acks {
		res[i] = queue.EnqueueResult{ID: jobs[i].ID, Duplicate: a.Duplicate}
		if a.Duplicate {
			res[i].ID = q.originalID(late, a.Sequence, jobs[i].ID)
		}
	}
	if err != nil {
		return res, fmt.Errorf("natsq: enqueue: %d of %d jobs acknowledged: %w", len(res), len(jobs), err)
	}
	return res, nil
}

// jobMsg builds the message that stores a prepared job.
func (q *Queue) jobMsg(j *queue.Job, now time.Time) (*nats.Msg, error) {
	body, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	var m *nats.Msg
	if j.NotBefore.After(now) {
		m = delayedMsg(q.n.delayed(j.Lane), body, j.NotBefore)
	} else {
		m = nats.NewMsg(q.n.ready(j.Lane))
		m.Data = body
	}
	if j.Key != "" {
		m.Header.Set(jetstream.MsgIDHeader, keyMsgID(j.Key))
	}
	return m, nil
}

// delayedMsg builds a message for a delayed subject, due at due.
func delayedMsg(subject string, body []byte, due time.Time) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(hdrDue, due.UTC().Format(time.RFC3339Nano))
	return m
}

// ackGrace is how long the acks of messages already published are awaited
// after the caller's context ended.
const ackGrace = 5 * time.Second

// ackContext returns the context that awaits acks: it keeps ctx's values
// and ends ackGrace after ctx ends, or when stop is called.
func ackContext(ctx context.Context) (late context.Context, stop func()) {
	late, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopAfter := context.AfterFunc(ctx, func() {
		t := time.NewTimer(ackGrace)
		defer t.Stop()
		select {
		case <-late.Done():
		case <-t.C:
			cancel(fmt.Errorf("no ack within %s: %w", ackGrace, context.Cause(ctx)))
		}
	})
	return late, func() {
		stopAfter()
		cancel(nil)
	}
}

// publishAll publishes msgs and returns the acks of the longest prefix of
// them that was acknowledged, in order, and why the rest were not: one
// message synchronously, more asynchronously in windows of asyncWindow.
// Once ctx ends nothing more is published; acks are awaited until late
// ends.
func (q *Queue) publishAll(ctx, late context.Context, msgs []*nats.Msg) ([]*jetstream.PubAck, error) {
	if len(msgs) == 1 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("job 0 not published: %w", err)
		}
		a, err := q.js.PublishMsg(late, msgs[0])
		if err != nil {
			return nil, fmt.Errorf("job 0: %w", err)
		}
		return []*jetstream.PubAck{a}, nil
	}
	acks := make([]*jetstream.PubAck, 0, len(msgs))
	for start := 0; start < len(msgs); start += asyncWindow {
		window := msgs[start:min(start+asyncWindow, len(msgs))]
		futures, pubErr := q.publishWindow(ctx, window, start)
		// Wait for what was sent even after an error, so that the results
		// say what was stored and no ack is left behind to arrive after
		// Enqueue returned.
		got, ackErr := awaitAcks(late, futures, start)
		acks = append(acks, got...)
		if ackErr != nil {
			return acks, ackErr
		}
		if pubErr != nil {
			return acks, pubErr
		}
	}
	return acks, nil
}

// publishWindow publishes window, whose first message is job first,
// asynchronously, and returns the futures of the messages published. It
// stops at the first message it could not publish, or when ctx ends.
func (q *Queue) publishWindow(ctx context.Context, window []*nats.Msg, first int) ([]jetstream.PubAckFuture, error) {
	futures := make([]jetstream.PubAckFuture, 0, len(window))
	for i, m := range window {
		if err := ctx.Err(); err != nil {
			return futures, fmt.Errorf("job %d not published: %w", first+i, err)
		}
		f, err := q.js.PublishMsgAsync(m)
		if err != nil {
			return futures, fmt.Errorf("job %d: %w", first+i, err)
		}
		futures = append(futures, f)
	}
	return futures, nil
}

// awaitAcks waits for the acks of futures, whose first is job first's, and
// returns those before the first failure, and that failure with how many
// of the futures after it failed too.
func awaitAcks(ctx context.Context, futures []jetstream.PubAckFuture, first int) ([]*jetstream.PubAck, error) {
	acks := make([]*jetstream.PubAck, 0, len(futures))
	var err error
	failed := 0
	for i, f := range futures {
		a, ferr := awaitAck(ctx, f)
		switch {
		case ferr == nil && err == nil:
			acks = append(acks, a)
		case ferr == nil:
		case err == nil:
			err = fmt.Errorf("job %d not acknowledged: %w", first+i, ferr)
			failed = 1
		default:
			failed++
		}
	}
	if failed > 1 {
		err = fmt.Errorf("%w (%d later jobs not acknowledged either)", err, failed-1)
	}
	return acks, err
}

// awaitAck waits for the ack of one asynchronous publish.
func awaitAck(ctx context.Context, f jetstream.PubAckFuture) (*jetstream.PubAck, error) {
	select {
	case a := <-f.Ok():
		return a, nil
	case err := <-f.Err():
		return nil, err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// originalID returns the id of the job stored at seq in the main stream, or
// fallback when that message is gone (acked, moved, retried).
func (q *Queue) originalID(ctx context.Context, seq uint64, fallback string) string {
	m, err := q.stream.GetMsg(ctx, seq)
	if err != nil {
		return fallback
	}
	var j struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(m.Data, &j) != nil || j.ID == "" {
		return fallback
	}
	return j.ID
}
