package natsq

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Moving delayed jobs. JetStream 2.9 has no scheduled messages, so a job due
// later waits on its lane's delayed subject, and the mover (one goroutine
// per Queue, started by its first Fetch) takes it from the delayed consumer:
// not yet due, it is nak'ed with a delay until it is, and the server holds
// it until then (NakWithDelay); due, it is published to its ready subject
// (with a message id derived from the delayed message) and then acked.
// Every replica's mover pulls from the same consumer, so each delayed job
// is moved by one of them at a time.

// moverBatch is how many delayed messages a mover handles per pull.
const moverBatch = 64

// moverBackoff is how long the mover waits after a failed pull.
const moverBackoff = time.Second

// startMover starts the mover once, unless the queue is closed.
func (q *Queue) startMover() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.moving || q.closed() {
		return
	}
	q.moving = true
	q.wg.Add(1)
	go q.runMover()
}

// runMover moves due jobs until Close.
func (q *Queue) runMover() {
	defer q.wg.Done()
	for q.ctx.Err() == nil {
		msgs, err := pull(q.ctx, q.later, moverBatch)
		// Messages that came before an error ended the pull (a 409, the
		// consumer deleted, the connection lost, Close) are handled first:
		// left alone they would wait out moverAckWait though due.
		for _, r := range msgs {
			q.move(r.msg)
		}
		if err != nil && q.ctx.Err() == nil {
			q.log.Warn("natsq: pull delayed jobs", "queue", q.cfg.Name, "err", err)
			sleepCtx(q.ctx, moverBackoff)
		}
	}
}

// move handles one delayed message. It runs to its end even after Close,
// within settleTimeout, so that a due job is not left waiting for the
// consumer's ack wait.
func (q *Queue) move(msg jetstream.Msg) {
	due, err := time.Parse(time.RFC3339Nano, msg.Headers().Get(hdrDue))
	if err == nil {
		if wait := due.Sub(q.cfg.Now()); wait > 0 {
			q.nak(msg, wait)
			return
		}
	}
	md, err := msg.Metadata()
	if err != nil {
		q.log.Warn("natsq: delayed job without metadata", "queue", q.cfg.Name, "err", err)
		return
	}
	m := nats.NewMsg(q.n.ready(laneOf(msg.Subject())))
	m.Data = msg.Data()
	m.Header.Set(jetstream.MsgIDHeader, derivedMsgID("m", md.Sequence.Stream, md.Timestamp))
	ctx, cancel := detach(q.ctx)
	defer cancel()
	if _, err := q.js.PublishMsg(ctx, m); err != nil {
		q.log.Warn("natsq: move due job", "queue", q.cfg.Name, "seq", md.Sequence.Stream, "err", err)
		q.nak(msg, moverBackoff)
		return
	}
	if err := msg.DoubleAck(ctx); err != nil {
		// Moved already: a second move after the ack wait is deduplicated
		// by its message id within the dedup window.
		q.log.Warn("natsq: ack moved job", "queue", q.cfg.Name, "seq", md.Sequence.Stream, "err", err)
	}
}

// nak asks the server to deliver msg again after wait.
func (q *Queue) nak(msg jetstream.Msg, wait time.Duration) {
	if err := msg.NakWithDelay(wait); err != nil {
		q.log.Warn("natsq: nak delayed job", "queue", q.cfg.Name, "err", err)
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
