package pacer

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Ride takes an idle moment of the schedule for a single slot, with
// commands sent behind a command that waits (a blocking read of the
// queue) on the same Redis connection, in the same round trip: Redis runs
// them the moment the read returns, so an idle replica's slot comes with
// its job instead of one round trip after it. The read may as well end
// with no job, so a ride takes only a moment nobody else wants: only while
// the schedule is idle (no slot of it held after now), by reserve.lua's
// rules, and otherwise it takes nothing and writes nothing to the
// schedule.
//
// A ride runs no script (see rideclaim.go): the job's reply waits for
// what Redis runs behind the read, and on an idle host any script costs
// Redis tens of microseconds where a few plain commands cost a few. It
// sends, in one MULTI, TIME, SET of the ride lock NX with a time to live,
// and HMGET of the schedule's hash, and decides itself. A reserve.lua call
// off the job's path then settles it (settleRide): the slot goes into the
// schedule and the lock goes. Until then every reserve.lua call honors
// the lock: no slot within an interval after the ride's.
//
// A ride's reply is no clock sample (when Redis ran it within the round
// trip is unknown), but it still tells how long replies take to arrive
// after Redis ran it (the lead).
//
// A ride's slot is placed by the typical lead, the median of the recent
// replies' delays, where other calls take the longest of them: one stall
// of the replica (a slow reply) would otherwise place the slots of its
// next eight rides that much after their jobs came, each job waiting for
// it. A ride's slot that arrives stale after all costs a slot of an idle
// schedule, and the job asks again.
type Ride struct {
	p    *Pacer
	call rideCall
	exec *redis.Cmd
}

// Ride returns a ride to send behind a blocking read, or nil when the
// replica should not ride now: it holds slots, its last ride found the
// schedule held by others until a moment still to come, or is asking for more than
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
	if len(p.buf) > 0 || p.batch.interval <= 0 || now.Before(p.heldUntil) ||
		(p.refilling != nil && !p.ridesBesideRefillLocked(now)) || p.deg.on ||
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

// Send queues the ride's commands in pipe, behind the commands already
// there. pipe must run on the Redis of the pacer's schedule (the same
// server and connection: a pipeline of a redis.Client, not of a cluster
// client).
func (r *Ride) Send(ctx context.Context, pipe redis.Pipeliner) {
	p := r.p
	p.mu.Lock()
	r.call = p.rideCallLocked()
	p.mu.Unlock()
	p.calls.Add(1)
	r.exec = r.call.send(ctx, pipe, p.key, p.rideKey)
}

// Landed takes the ride's reply once the pipeline's replies are read;
// jobs is how many jobs the read in front brought. With jobs, a granted
// slot joins this replica's buffer like any other; with none it is
// forfeited at once as "idle" (no job came for it). A ride that failed (a
// broken connection) or found the schedule held grants nothing, and the
// replica asks as usual.
func (r *Ride) Landed(jobs int) {
	if r.exec == nil {
		return
	}
	p := r.p
	recv := p.cfg.Clock.Now()
	v, err := r.exec.Result()
	if err != nil {
		return
	}
	res, took, locked, err := r.call.decide(v)
	if err != nil {
		if l := p.cfg.Log; l != nil {
			l.Warn("pacer: ride: unreadable reply", "err", err)
		}
		return
	}
	if locked {
		var slot time.Time
		if took {
			slot = res.Slot(0)
		}
		go p.settleRide(r.call.token, slot)
	}
	p.mu.Lock()
	p.seq = max(p.seq, res.Seq)
	p.clock.addLead(recv, res.Now)
	if took {
		p.deg.noteReplyLocked(res, recv, p.clock, p.cfg.Horizon)
	} else if res.First.After(res.Now) {
		// Held by others until then: a ride before it would only be
		// refused again, and cost Redis its lock and settle (every read
		// of a lane without jobs ends in one while a backlog drains).
		p.heldUntil = p.clock.local(res.First)
	}
	p.mu.Unlock()
	if !took {
		return
	}
	p.granted.Add(1)
	p.rides.Add(1)
	if jobs == 0 {
		p.idle.Add(1)
		return
	}
	p.addSlots(res, false, true)
}
