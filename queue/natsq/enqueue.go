package natsq

import (
	"context"
	"encoding/json"
	"errors"
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
	acks, err := q.publishAll(ctx, msgs)
	if err != nil {
		return nil, fmt.Errorf("natsq: enqueue: %w", err)
	}
	res := make([]queue.EnqueueResult, len(jobs))
	for i, a := range acks {
		res[i] = queue.EnqueueResult{ID: jobs[i].ID, Duplicate: a.Duplicate}
		if a.Duplicate {
			res[i].ID = q.originalID(ctx, a.Sequence, jobs[i].ID)
		}
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

// publishAll publishes msgs and returns their acks in order: one
// synchronously, more asynchronously in windows of asyncWindow. On error
// some messages may be stored.
func (q *Queue) publishAll(ctx context.Context, msgs []*nats.Msg) ([]*jetstream.PubAck, error) {
	if len(msgs) == 1 {
		a, err := q.js.PublishMsg(ctx, msgs[0])
		if err != nil {
			return nil, err
		}
		return []*jetstream.PubAck{a}, nil
	}
	acks := make([]*jetstream.PubAck, 0, len(msgs))
	for start := 0; start < len(msgs); start += asyncWindow {
		window := msgs[start:min(start+asyncWindow, len(msgs))]
		futures := make([]jetstream.PubAckFuture, 0, len(window))
		var err error
		for _, m := range window {
			var f jetstream.PubAckFuture
			if f, err = q.js.PublishMsgAsync(m); err != nil {
				break
			}
			futures = append(futures, f)
		}
		// Wait for what was sent even after an error, so that no ack is
		// left behind to arrive after Enqueue returned.
		for _, f := range futures {
			a, ferr := awaitAck(ctx, f)
			err = errors.Join(err, ferr)
			acks = append(acks, a)
		}
		if err != nil {
			return nil, err
		}
	}
	return acks, nil
}

// awaitAck waits for the ack of one asynchronous publish.
func awaitAck(ctx context.Context, f jetstream.PubAckFuture) (*jetstream.PubAck, error) {
	select {
	case a := <-f.Ok():
		return a, nil
	case err := <-f.Err():
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
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
