package pacer

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/keep"
)

// topUp is one background refill (afterClaimLocked): the claim's context,
// the refill's channel (endRefill closes it), and what reserve asks for.
type topUp struct {
	ctx    context.Context
	ch     chan struct{}
	want   int
	stride time.Duration
	from   time.Time
}

// topUpIdle is how long a top-up goroutine with nothing to do waits for
// the next before it exits.
const topUpIdle = 250 * time.Millisecond

// startTopUp hands t to the idle top-up goroutine, or starts one
// (keep.Loop), which runs whatever startTopUp hands it until it has waited
// topUpIdle for nothing or the context of the claim that started it ends.
// The goroutine outlives its refill: one started per refill grew its stack
// again through the Redis client each time (a fourteenth of a replica's
// CPU at the uncapped ceiling, in runtime.newstack), while one kept busy
// keeps its stack for the next. At most one refill runs at a time
// (p.refilling), so one goroutine serves them all.
func (p *Pacer) startTopUp(t topUp) {
	if !keep.Hand(p.topUps, t) {
		p.topUpLoops.Add(1)
		go keep.Loop(t, p.topUps, topUpIdle, t.ctx.Done(), p.runTopUp)
	}
}

// runTopUp makes the refill's one Reserve call, bounded by one horizon
// (its slots would be stale after that) and not by the claim's context,
// adds what it grants to the buffer and ends the refill. Its failures are
// left to the next claim to meet.
func (p *Pacer) runTopUp(t topUp) {
	p.topUpRuns.Add(1)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), p.cfg.Horizon)
	defer cancel()
	if r, err := p.reserve(rctx, t.want, t.stride, t.from); err == nil {
		p.addSlots(r, t.stride > 0)
	}
	p.endRefill(t.ch)
}
