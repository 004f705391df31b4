package natsq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sluicehq/sluice/queue"
)

// delivery is one fetched message. JetStream acks by stream sequence, not
// by delivery, so a consumer cannot learn from the server that its
// delivery was given to another consumer. A delivery therefore counts as
// lost once its local deadline passes (see deadline). After the deadline
// every settle returns queue.ErrSettled and does nothing; the job is, or
// will be, delivered again.
type delivery struct {
	q        *Queue
	msg      jetstream.Msg
	job      queue.Job
	seq      uint64    // stream sequence of msg
	stored   time.Time // when msg was stored, for derived message ids
	released int       // times msg was released before this delivery (release.go)

	mu       sync.Mutex
	state    settleState
	deadline time.Time
}

type settleState int

const (
	open     settleState = iota
	settling             // a settle is running
	settled
)

// deadline is when a delivery received, or extended, at t is taken as
// lost: 90% of the visibility timeout after t. t is no earlier than the
// server started the visibility timeout (the time the pull request or the
// in-progress ack was sent, or, for a message that waited in a blocking
// pull, the time it was read), and the margin absorbs the time a message
// takes to reach the reader. A settle begun before the deadline is thus
// sent while the server still holds the job for this consumer, unless the
// message took longer than the margin to arrive or the settle is slower.
func (q *Queue) deadline(t time.Time) time.Time {
	return t.Add(q.cfg.VisibilityTimeout - q.cfg.VisibilityTimeout/10)
}

// Job implements queue.Delivery.
func (d *delivery) Job() *queue.Job { return &d.job }

// begin claims the delivery for one settle, or says why it cannot be.
func (d *delivery) begin() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != open {
		return fmt.Errorf("natsq: job %s: %w", d.job.ID, queue.ErrSettled)
	}
	if time.Now().After(d.deadline) {
		d.state = settled
		return fmt.Errorf("natsq: job %s: visibility timeout passed: %w", d.job.ID, queue.ErrSettled)
	}
	d.state = settling
	return nil
}

// end finishes a settle begun with begin: on error the delivery may be
// settled again (every settle is safe to repeat).
func (d *delivery) end(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil && !errors.Is(err, queue.ErrSettled) {
		d.state = open
	} else {
		d.state = settled
	}
}

// Ack implements queue.Delivery: an ack the server confirms (AckSync).
func (d *delivery) Ack(ctx context.Context) error {
	if err := d.begin(); err != nil {
		return err
	}
	err := d.ack(ctx)
	d.end(err)
	return err
}

func (d *delivery) ack(ctx context.Context) error {
	if err := d.msg.DoubleAck(ctx); err != nil {
		if errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			return fmt.Errorf("natsq: ack %s: %w", d.job.ID, queue.ErrSettled)
		}
		return fmt.Errorf("natsq: ack %s: %w", d.job.ID, err)
	}
	return nil
}

// Retry implements queue.Delivery. The job is published again, with
// LastError set and its attempts so far in the body: to its ready subject
// when delay <= 0, else to its delayed subject, due after delay. Only then
// is this message acked, so nothing is lost between the two steps; the
// republish carries a message id derived from this message, so repeating a
// Retry that failed half-way stores the job once.
func (d *delivery) Retry(ctx context.Context, delay time.Duration, reason string) (bool, error) {
	if err := d.begin(); err != nil {
		return false, err
	}
	if d.job.Attempt >= d.q.cfg.MaxAttempts {
		err := d.q.deadLetter(ctx, d, reason)
		d.end(err)
		return err == nil, err
	}
	err := d.retry(ctx, delay, reason)
	d.end(err)
	return false, err
}

func (d *delivery) retry(ctx context.Context, delay time.Duration, reason string) error {
	j := d.job
	j.LastError = reason
	return d.republish(ctx, "retry", "r", j, delay)
}

// republish puts j back into its lane, due after delay (at once when 0),
// under a message id derived from this delivery and prefix, so that a
// repeat is a duplicate the stream drops; then it acks this delivery.
func (d *delivery) republish(ctx context.Context, op, prefix string, j queue.Job, delay time.Duration) error {
	body, err := json.Marshal(&j)
	if err != nil {
		return fmt.Errorf("natsq: %s %s: %w", op, j.ID, err)
	}
	var m *nats.Msg
	if delay > 0 {
		m = delayedMsg(d.q.n.delayed(j.Lane), body, d.q.cfg.Now().Add(delay))
	} else {
		m = nats.NewMsg(d.q.n.ready(j.Lane))
		m.Data = body
	}
	m.Header.Set(jetstream.MsgIDHeader, derivedMsgID(prefix, d.seq, d.stored))
	if _, err := d.q.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("natsq: %s %s: %w", op, j.ID, err)
	}
	actx, cancel := detach(ctx)
	defer cancel()
	return d.ack(actx)
}

// DeadLetter implements queue.Delivery: the job, LastError set to reason,
// is published to the dead letter stream, then this message is acked.
func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	if err := d.begin(); err != nil {
		return err
	}
	err := d.q.deadLetter(ctx, d, reason)
	d.end(err)
	return err
}

// Extend implements queue.Delivery with an in-progress ack (+WPI) sent as
// a request, so that Extend returns only when the server restarted the
// visibility timeout.
func (d *delivery) Extend(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != open {
		return fmt.Errorf("natsq: extend %s: %w", d.job.ID, queue.ErrSettled)
	}
	sent := time.Now()
	if sent.After(d.deadline) {
		d.state = settled
		return fmt.Errorf("natsq: extend %s: visibility timeout passed: %w", d.job.ID, queue.ErrSettled)
	}
	if _, err := d.q.js.Conn().RequestWithContext(ctx, d.msg.Reply(), []byte("+WPI")); err != nil {
		return fmt.Errorf("natsq: extend %s: %w", d.job.ID, err)
	}
	d.deadline = d.q.deadline(sent)
	return nil
}

// deadLetter publishes d's job to the dead letter stream with reason, then
// acks d's message.
func (q *Queue) deadLetter(ctx context.Context, d *delivery, reason string) error {
	j := d.job
	j.LastError = reason
	body, err := json.Marshal(&j)
	if err != nil {
		return fmt.Errorf("natsq: dead-letter %s: %w", j.ID, err)
	}
	m := nats.NewMsg(q.n.dead())
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, derivedMsgID("d", d.seq, d.stored))
	m.Header.Set(hdrDeadAt, q.cfg.Now().UTC().Format(time.RFC3339Nano))
	if _, err := q.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("natsq: dead-letter %s: %w", j.ID, err)
	}
	actx, cancel := detach(ctx)
	defer cancel()
	return d.ack(actx)
}

var _ queue.Releaser = (*delivery)(nil)

// Release implements queue.Releaser: the message is negatively
// acknowledged, so the server delivers it again at once, to any consumer,
// in its place in its lane. JetStream counts that delivery; the queue
// counts the release too (release.go), and the next fetch takes it off, so
// the job's next Attempt is the same. When the count cannot be written,
// the release still happens and counts as an attempt.
func (d *delivery) Release(ctx context.Context) error {
	if err := d.begin(); err != nil {
		return err
	}
	if err := d.q.noteRelease(ctx, d); err != nil {
		d.q.log.Warn("natsq: release counts as an attempt", "queue", d.q.cfg.Name, "job", d.job.ID, "err", err)
	}
	err := d.msg.Nak()
	if err != nil {
		err = fmt.Errorf("natsq: release %s: %w", d.job.ID, err)
	}
	d.end(err)
	return err
}
