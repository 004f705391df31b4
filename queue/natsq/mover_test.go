package natsq_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
)

// errBatchCut stands for an error that ends a pull after some messages came
// (a 409 on a leadership change, the consumer deleted, the connection lost).
var errBatchCut = errors.New("batch cut short")

// cutConsumer is a consumer whose first non-empty FetchNoWait batch ends
// with errBatchCut after its messages.
type cutConsumer struct {
	jetstream.Consumer
	cut atomic.Bool // the error was given
}

func (c *cutConsumer) FetchNoWait(n int) (jetstream.MessageBatch, error) {
	b, err := c.Consumer.FetchNoWait(n)
	if err != nil {
		return nil, err
	}
	var msgs []jetstream.Msg
	for m := range b.Messages() {
		msgs = append(msgs, m)
	}
	err = b.Error()
	if err == nil && len(msgs) > 0 && c.cut.CompareAndSwap(false, true) {
		err = errBatchCut
	}
	return newBatch(msgs, err), nil
}

// batch is a finished jetstream.MessageBatch.
type batch struct {
	msgs chan jetstream.Msg
	err  error
}

func newBatch(msgs []jetstream.Msg, err error) *batch {
	b := &batch{msgs: make(chan jetstream.Msg, len(msgs)), err: err}
	for _, m := range msgs {
		b.msgs <- m
	}
	close(b.msgs)
	return b
}

func (b *batch) Messages() <-chan jetstream.Msg { return b.msgs }
func (b *batch) Error() error                   { return b.err }

// A due delayed job that came in a pull ending with an error is moved at
// once, not after the delayed consumer's ack wait (30s).
func TestMoverMovesMessagesOfFailedPull(t *testing.T) {
	srv := testnats.Start(t)
	t0 := time.Now()
	var skew atomic.Int64 // how far the queue's clock is ahead of t0
	cfg := queue.Config{Name: "movecut", Lanes: []string{"only"},
		Now: func() time.Time { return t0.Add(time.Duration(skew.Load())) }}
	q, _ := open(t, srv.Conn(), cfg)
	cons := &cutConsumer{}
	natsq.WrapDelayed(q, func(c jetstream.Consumer) jetstream.Consumer {
		cons.Consumer = c
		return cons
	})

	enqueue(t, q, &queue.Job{ID: "late", Payload: json.RawMessage(`{}`), NotBefore: t0.Add(time.Hour)})
	skew.Store(int64(2 * time.Hour)) // due now

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ds, err := q.Fetch(ctx, "only", 1) // starts the mover
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch: got %d deliveries, %v, want the due job within 10s (the mover's ack wait is 30s)", len(ds), err)
	}
	if id := ds[0].Job().ID; id != "late" {
		t.Errorf("Fetch: got job %q, want late", id)
	}
	if !cons.cut.Load() {
		t.Errorf("the mover's pull was never cut short: the test did not test the failed pull")
	}
}
