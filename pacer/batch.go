package pacer

import "time"

// batchPolicy decides how many slots one Redis call asks for. It is pure:
// it learns from what the Pacer tells it (claims, waits, drops) and
// answers with a size; time is passed in.
//
// A batch grows (doubling) while every slot is used and halves after
// waste. It is bounded by what this replica can use: a saturated replica
// (most recent claims had to wait for their slot) takes at most its fair
// share of the horizon, the horizon's slots over the replicas drawing on
// the schedule, so busy replicas share the slots evenly; a replica with
// little demand takes only what its waiters can claim before the slots
// pass their lateness bound. A replica whose clock map is too uncertain to
// place slots within the lateness bound takes one slot at a time, so that
// its slots never form a block that lands on top of another replica's.
//
// A replica with steady demand well under the schedule's rate, its claims
// a few intervals apart but well within the lateness bound of each other,
// asks with a stride instead (see stride): slots spread at about its own
// pace over the horizon, so that one call serves many claims and a job
// that comes finds a slot already due.
type batchPolicy struct {
	maxBatch    int
	horizon     time.Duration
	maxLateness time.Duration

	next      int           // size to ask for next, before bounds
	dropped   int           // slots dropped since the last refill
	lastClaim time.Time     // when a waiter last took slots
	claimGap  time.Duration // moving average of the time between claims
	interval  time.Duration // between slots, as the last grant said
	waitScore float64       // moving average of claims that waited (1) or not (0)
	// lastReturn is when the caller of the last claim got its slot (the
	// slot's moment, or, when the caller slept for the slot itself, not
	// for a moment ahead of it, and woke later, its waking), and
	// claimDelay the moving average of how long after it the next claim
	// came: a saturated replica claims its next slot as soon as it has
	// sent on the last; one with little room in flight (a slow provider)
	// comes back much later, however long it then waits for its slot. A
	// caller whose timer wakes it late for its slot (a loaded machine)
	// comes back at once after its waking: counted from the slot, it
	// would never look saturated. One that takes slots ahead (TakeAhead)
	// counts from the slot (see take).
	lastReturn time.Time
	claimDelay time.Duration
	// askDelay is the moving average of how long after a caller got its
	// slot the next claim was asked for (its start, before any refill it
	// waits for), asked whether one was measured: the replica's own pace
	// when slots are at hand. claimGap counts the refills claims wait for
	// as well, and a replica that cannot use a batch waits for a refill at
	// every claim, so a batch sized by claimGap alone stays at one slot
	// once a slow round trip made it so (see useful).
	askDelay time.Duration
	asked    bool
}

const (
	// waitMemory is the weight of the past in the wait score's moving
	// average; the newest claim weighs 1 − waitMemory.
	waitMemory = 0.8
	// saturatedScore is the wait score from which a replica counts as
	// saturated: it always has a job waiting for the next slot.
	saturatedScore = 0.7
	// backloggedScore is the wait score from which a replica holding
	// slots a stride apart counts as backlogged (backlogged).
	backloggedScore = 0.9
	// claimGapMemory is the weight of the past in the claim gap's moving
	// average.
	claimGapMemory = 4
	// maxStrideSteps bounds a stride, in intervals of the schedule: each
	// slot granted with a stride passes over at most this many grid
	// points, which reserve.lua writes as gaps.
	maxStrideSteps = 32
	// maxStrideBatch bounds a grant with a stride.
	maxStrideBatch = 64
)

func newBatchPolicy(cfg Config) batchPolicy {
	return batchPolicy{maxBatch: cfg.MaxBatch, horizon: cfg.Horizon, maxLateness: cfg.MaxLateness, next: 1}
}

// noteWait records whether a claim had to wait for its slot (or found the
// schedule full).
func (b *batchPolicy) noteWait(waited bool) {
	w := 0.0
	if waited {
		w = 1
	}
	b.waitScore = waitMemory*b.waitScore + (1-waitMemory)*w
}

// noteReturn records when the caller of the last claim got its slot.
func (b *batchPolicy) noteReturn(at time.Time) { b.lastReturn = at }

// noteClaim records a claim at now.
func (b *batchPolicy) noteClaim(now time.Time) {
	if !b.lastReturn.IsZero() {
		b.claimDelay = averaged(b.claimDelay, max(now.Sub(b.lastReturn), 0), false)
	}
	if !b.lastClaim.IsZero() {
		b.claimGap = averaged(b.claimGap, now.Sub(b.lastClaim), b.claimGap == 0)
	}
	b.lastClaim = now
}

// noteAsk records that a claim was asked for d after the caller of the
// claim before it got its slot (0 when it came sooner: another caller's).
func (b *batchPolicy) noteAsk(d time.Duration) {
	b.askDelay = averaged(b.askDelay, max(d, 0), !b.asked)
	b.asked = true
}

// averaged is the moving average avg with the sample d added (weight
// claimGapMemory for the past), or d itself when it is the first.
func averaged(avg, d time.Duration, first bool) time.Duration {
	if first {
		return d
	}
	return (claimGapMemory*avg + d) / (claimGapMemory + 1)
}

// noteDropped records n slots dropped unclaimed.
func (b *batchPolicy) noteDropped(n int) { b.dropped += n }

// noteInterval records the schedule's interval from a grant.
func (b *batchPolicy) noteInterval(d time.Duration) { b.interval = d }

// size returns how many slots to ask for when need are wanted now, with
// sharers replicas on the schedule; uncertain says the clock map cannot
// place slots within the lateness bound.
func (b *batchPolicy) size(need, sharers int, uncertain bool) int {
	if b.dropped > 0 {
		b.next = max(1, b.next/2)
	} else {
		b.next = min(b.maxBatch, b.next*2)
	}
	b.dropped = 0
	if uncertain {
		return need
	}
	return max(need, min(b.next, b.limit(sharers)))
}

// stride returns how far apart the slots of the next grant may be, and
// how many to ask for; 0 for slots as close as the schedule allows. A
// stride is three quarters of the time between claims, so that slots come
// a third more often than jobs: a job finds a slot due (or due within its
// lateness bound) and one call serves a horizon of claims. It is for a
// replica that is not saturated, whose claims need need at most one slot
// and come more than an eighth of the lateness bound apart (closer, a
// batch of slots one interval apart serves eight claims or more before it
// passes its lateness bound), when the schedule is far from full (the
// sharers, each claiming as often as this one, would use at most half its
// slots: near the cap, replicas taking slots a stride apart from where
// their last ones were would pass over points none of them comes back
// for), when the stride is at least two intervals (else slots as close as
// the schedule allows serve as well), at most maxStrideSteps intervals
// (the gaps a grant leaves), and within 90% of the lateness bound (else a
// job would wait for its slot far longer than a call takes).
func (b *batchPolicy) stride(need, sharers int) (time.Duration, int) {
	if need > 1 || b.interval <= 0 || b.claimGap <= b.maxLateness/8 || b.saturated() ||
		b.claimGap < 2*time.Duration(max(1, sharers))*b.interval {
		return 0, 0
	}
	s := b.claimGap * 3 / 4
	if s < 2*b.interval || s > maxStrideSteps*b.interval || s > b.maxLateness*9/10 {
		return 0, 0
	}
	return s, min(b.maxBatch, maxStrideBatch, max(1, int(b.horizon/s)))
}

// saturatedSize is the batch for a replica leaving slots granted with a
// stride because its claims wait for them (backlogged): a fair share of
// the horizon at once, from which later batches go on (size).
func (b *batchPolicy) saturatedSize(sharers int) int {
	b.next = b.fair(sharers)
	b.dropped = 0
	return b.next
}

// backlogged reports whether nearly every recent claim waited for its
// slot (ten or so in a row): a replica holding slots a stride apart whose
// jobs now come faster than them. Steady light demand waits now and then,
// when two jobs come together, and so stays under it.
func (b *batchPolicy) backlogged() bool { return b.waitScore >= backloggedScore }

// saturated reports whether most claims waited for their slot and came
// right after the previous claim's caller got its slot: this replica
// always has a job waiting.
func (b *batchPolicy) saturated() bool {
	return b.waitScore >= saturatedScore && b.claimDelay <= b.interval && b.interval > 0
}

// limit bounds a batch: a saturated replica's fair share of the horizon,
// or what a lightly loaded one can use (useful; see saturated).
func (b *batchPolicy) limit(sharers int) int {
	if !b.saturated() {
		return b.useful()
	}
	return b.fair(sharers)
}

// fair is a fair share of the horizon: its slots over the sharers.
func (b *batchPolicy) fair(sharers int) int {
	fair := int(float64(b.horizon) / float64(b.interval) / float64(max(1, sharers)))
	return min(b.maxBatch, max(1, fair))
}

// useful is the most slots this replica could claim before they pass
// their lateness bound: waiters claim one every pace while slots come one
// every interval, so the k-th slot is claimed k×(pace−interval) late. The
// pace is the time between claims, or, when less, how soon after getting
// a slot a caller asks for the next (askDelay) and a third more, for the
// claim's own time and the caller's unsteady pace: claims that each
// waited for a Redis round trip come a round trip apart, but from a
// buffer the replica would claim at its own pace. Sized by the round trip
// alone, a replica far below the schedule's rate (no cap in reach: slots
// microseconds apart) got one slot per call, so every claim waited a
// round trip, which kept the batch at one (one call per job at the
// ceiling on a loaded host). Only for a replica whose claims mostly find
// their slots due: one whose claims wait for their slots' moments (a cap
// binds) comes back at once however slowly it uses them, and is sized by
// the time between its claims as before (on a loaded host, where its late
// wakings keep it from counting as saturated, the own pace gave it batches
// it could not use: 64 replicas at a 500/s cap forfeited 220-350 slots
// unclaimed against 10-14).
func (b *batchPolicy) useful() int {
	pace := b.claimGap
	if own := b.askDelay + b.askDelay/3; b.asked && b.waitScore < saturatedScore && own < pace {
		pace = own
	}
	lag := pace - b.interval - b.interval/10
	if b.lastClaim.IsZero() || lag <= 0 {
		return b.maxBatch
	}
	return max(1, min(b.maxBatch, int(b.maxLateness/lag)))
}
