package dispatch

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/keep"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
)

// sendTask is one request for a sender: the job, the slot it goes on, and
// the cluster-wide permit it holds.
type sendTask struct {
	ctx     context.Context
	d       queue.Delivery
	slot    pacer.Slot
	release func()
}

// senderIdle is how long a sender with nothing to send waits for another
// request before it exits.
const senderIdle = 2 * time.Second

// startSend hands t to an idle sender, or starts one (keep.Loop), which
// sends whatever startSend hands it until it has waited senderIdle for
// nothing or Run has ended. Senders outlive their request: a goroutine
// started per request grows its stack again through the HTTP client each
// time (a tenth of a replica's CPU at the ceiling), while a sender keeps
// its stack for the next. There are never more senders than requests open
// at the busiest moment of the last senderIdle (at most
// sink.max_in_flight).
func (e *Engine) startSend(t sendTask) {
	e.sends.Add(1)
	if !keep.Hand(e.senders, t) {
		e.started.Add(1)
		go keep.Loop(t, e.senders, senderIdle, e.quit, e.runSend)
	}
}

// runSend sends one task and frees its room in flight and its permit.
func (e *Engine) runSend(t sendTask) {
	defer e.sends.Done()
	defer func() { <-e.inflight }()
	defer t.release()
	e.send(t.ctx, t.d, t.slot)
}
