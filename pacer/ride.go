package pacer

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Ride is one Reserve call for a single slot, sent behind a command that
// waits (a blocking read of the queue) on the same Redis connection, in
// the same round trip: Redis runs it the moment the read returns, so an
// idle replica's slot comes with its job instead of one round trip after
// it. The read may as well end with no job, so a ride takes only a moment
// nobody else wants: reserve.lua grants it only while the schedule is idle
// (no slot of it held after now; see Rides in reserve.lua) and otherwise
// refuses it without writing anything; the replica then asks as usual.
//
// A ride's reply is no clock sample (when Redis ran it within the round
// trip is unknown), but it still tells how long replies take to arrive
// after the script ran (the lead).
//
// A ride's slot is placed by the typical lead, the median of the recent
// replies' delays, where other calls take the longest of them: one stall
// of the replica (a slow reply) would otherwise place the slots of its
// next eight rides that much after their jobs came, each job waiting for
// it. A ride's slot that arrives stale after all costs a slot of an idle
// schedule, and the job asks again.
type Ride struct {
	p     *Pacer
	cmd   *redis.Cmd
	epoch int64 // the step epoch when the call was made (forfeitStepLocked)
}

// Ride returns a ride to send behind a blocking read, or nil when the
// replica should not ride now: it holds slots, or is asking for more than
// the claim waiting on that call needs (see ridesBesideRefillLocked), its
// clock map is unsettled or too uncertain to place a slot, it stands
// aside, paces locally while Redis is away, or pacer.tenants is on (a
// ride knows nothing of the tenants waiting).
func (p *Pacer) Ride() *Ride {
	if p.cfg.Tenants.On() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Clock.Now()
	if len(p.buf) > 0 || (p.refilling != nil && !p.ridesBesideRefillLocked(now)) || p.deg.on ||
		p.clock.n < asideSamples || p.uncertainLocked(now) || p.asideLocked(now) != nil {
		return nil
	}
	return &Ride{p: p}
}

// ridesBesideRefillLocked reports whether a ride may go out while a call
// for slots is under way: when this replica asks for one slot at a time
// (its claims come too seldom to use two before they pass their lateness
// bound, and with no stride), so that the call brings only the slot of the
// claim waiting on it, whose job is in hand, and the next job would
// otherwise wait one more round trip for its own. Without it, an idle
// replica that once asked after its job (a ride refused, or none sent)
// went on asking after every job: the claim's call was still out when the
// fetch after the job blocked again. A ride that lands while the call is
// out joins the buffer like any slot; one that finds the schedule held is
// refused as always. p.mu must be held.
func (p *Pacer) ridesBesideRefillLocked(now time.Time) bool {
	if stride, _ := p.strideLocked(1, now); stride > 0 {
		return false
	}
	return p.batch.interval > 0 && p.batch.limit(p.sharersNow()) < 2
}

// Send queues the ride's call in pipe, behind the commands already there.
// pipe must run on the Redis of the pacer's schedule (the same server and
// connection: a pipeline of a redis.Client, not of a cluster client).
func (r *Ride) Send(ctx context.Context, pipe redis.Pipeliner) {
	p := r.p
	p.mu.Lock()
	keys, args := p.reserveArgsLocked(1, 0, time.Time{}, true)
	r.epoch = p.stepEpoch
	p.mu.Unlock()
	p.calls.Add(1)
	r.cmd = reserveScript.EvalSha(ctx, pipe, keys, args...)
}

// Landed takes the ride's reply once the pipeline's replies are read;
// jobs is how many jobs the read in front brought. With jobs, a granted
// slot joins this replica's buffer like any other; with none it is
// forfeited at once as "idle" (no job came for it). A ride that failed
// (NOSCRIPT after Redis lost its scripts, a broken connection) or was
// refused grants nothing, and the replica asks as usual.
func (r *Ride) Landed(jobs int) {
	if r.cmd == nil {
		return
	}
	p := r.p
	recv := p.cfg.Clock.Now()
	v, err := r.cmd.Result()
	if err != nil {
		return
	}
	res, err := parseReservation(v, nil)
	if err != nil {
		if l := p.cfg.Log; l != nil {
			l.Warn("pacer: ride: unreadable reply", "err", err)
		}
		return
	}
	p.mu.Lock()
	p.seq = max(p.seq, res.Seq)
	p.lapsed += res.Lapsed
	if p.clock.ahead(recv, res.Now) {
		// A ride is no clock sample (its sending time says nothing of when
		// it ran), but Redis's time after the reply's arrival shows a step
		// forward as well.
		p.clock.reset()
		p.noteStepLocked()
	}
	p.forfeitStepLocked(&res, r.epoch)
	p.clock.addLead(recv, res.Now)
	if res.Granted > 0 {
		p.deg.noteReplyLocked(res, recv, p.clock, p.cfg.Horizon)
		if jobs == 0 {
			// The slot is not used, but the schedule moved past it:
			// later calls must not restart behind it.
			p.raiseHintLocked(res.Slot(res.Granted - 1))
		}
	}
	p.mu.Unlock()
	if res.Granted == 0 {
		return
	}
	p.granted.Add(int64(res.Granted))
	p.rides.Add(1)
	if jobs == 0 {
		p.idle.Add(int64(res.Granted))
		return
	}
	p.addSlots(res, false)
}
