// Package pacer keeps one schedule of slots for a whole cluster, in Redis,
// so that any number of replicas together send at most Rate requests per
// second to a provider, evenly spaced, as the provider counts them.
//
// # The algorithm
//
// The schedule is GCRA, the leaky bucket as a meter: one Redis hash per
// provider holds the theoretical arrival time (tat) of the next free slot.
// A Redis call (reserve.lua) grants up to n slots starting at tat, one every
// 1/Rate seconds, and moves tat past them; it never grants a slot further
// ahead of now than Horizon. After an idle spell tat may lag now by at most
// Burst-1 intervals, so at most Burst slots go at once. Time comes from
// Redis TIME inside the script, never from a replica's clock, so clock skew
// between hosts cannot bend the rate; if the Redis clock itself goes back,
// the schedule keeps its distance to now and grants nothing twice.
//
// # Batching
//
// A replica asks for several slots in one call and keeps them locally: at
// high rates Redis round trips per slot fall well below one. The batch
// policy (batchPolicy, pure) grows a batch while every slot is used and
// halves it after waste; a saturated replica takes at most its fair share
// of the horizon, a lightly loaded one only what its waiters can claim in
// time, at their own pace when their claims find their slots due: how
// soon after getting a slot a caller asks for the next, not how long its
// claims waited for Redis (a replica whose claims each waited a round trip
// would otherwise be sized one slot a call, and every claim would wait a
// round trip again: one call per job far below the cap on a loaded host).
// A replica whose claims wait for their slots is sized by the time between
// them. A replica asks for more before its slots run out, in the
// background, so the schedule runs on without gaps. Slots granted and not
// used are lost: the cap holds even when a replica dies holding slots.
//
// Slots one interval apart serve few claims when a replica's jobs come
// several intervals apart: the later slots pass their lateness bound first.
// A replica with such steady demand (claims between an eighth and 90% of
// MaxLateness apart, at most 32 intervals apart) asks with a stride
// instead: up to 64 slots three quarters of its claim gap apart, over the
// horizon, topped up from a stride past its latest slot. The grid points
// such a grant passes over are kept as gaps (a sorted set beside the hash)
// and every later call takes the earliest gaps it can use before any point
// after tat, so a point is still granted once and the rate is unchanged.
// A hold (Throttle, the adaptive hold, the return from local mode), a rate
// change, a clock that went back and a detected rollback drop the gaps:
// their points are lost, never granted twice. At 5,000 jobs/s under a cap
// of 20,000 this takes the pacer's Redis calls from about 0.45 per job to
// under 0.05 (make bench); a quarter of the slots granted that way go
// unused, which costs nothing while the cap is far. A replica holding
// strided slots whose claims nearly all wait for them (a backlog came) tops
// up at once with its fair share of slots one interval apart, between them.
//
// # Rides
//
// An idle replica would still spend one round trip per job: the job comes,
// then the replica asks for its slot. Where the queue is read from the
// same Redis, the call can go with the read instead: Ride gives a call for
// one slot that the queue sends right behind its blocking read, in the
// same pipeline (redisq.WithRider), and Redis runs it the moment the read
// returns, so the slot arrives with the job. The read may also end empty,
// so reserve.lua grants a ride only while the schedule is idle (no slot of
// it held after now): a ride never takes a slot another replica was
// waiting for, and refused it writes nothing. A granted ride whose read
// brought no job is forfeited at once ("idle"); one comes at most per lane
// and block slice (half a second) while the cluster is idle. A ride's reply
// is no clock sample: when it ran within its long round trip is unknown.
// A replica that holds slots does not ride; one whose claim has a call out
// rides beside it only when that call asks for the claim's one slot (its
// batches are of one slot, with no stride): otherwise the job after one
// that came without its slot would wait for a call as well, and the one
// after it, and so on. A ride asks for no slot closer than what most
// recent replies took to arrive (their median), where other calls take
// the longest: one stall of the replica would otherwise place its next
// eight rides' slots that much after their jobs.
//
// # Time at the provider
//
// The provider counts arrivals, so a slot's Redis time must become the
// right moment on each replica. Every call is a clock sample (sent, answered,
// Redis time); the map from Redis time to this replica's clock uses the
// sample with the smallest error bound, half its round trip plus drift for
// its age, as NTP does, so a slow reply cannot shift the slots it carries.
// A replica whose replies are slow asks for no slot closer than they take.
// On a schedule so fast that half MaxLateness spans 64 slots or more (no
// cap in reach), it asks by what most replies took, as a ride does, and
// the moments its reply cannot reach are skipped rather than waited out
// when they hold 64 slots or more (reserve.lua, Lead).
//
// A request leaves within MaxLateness of its slot, or the slot is
// forfeited: slots whose reply came too late ("stale"), slots no waiter
// claimed in time ("unclaimed"), and slots whose sender stalled past the
// deadline ("late", checked by the caller right before it writes the
// request, see Slot) are never spent late; "ineligible" (tenants over
// their limits) and "idle" (rides, above) are given up too. Stats counts each reason and
// reports the clock offset and its uncertainty.
//
// Take returns when the slot comes. TakeAhead returns a little before it
// (at most one interval of the schedule before, or as far ahead as asked
// on a very fast schedule, as above), for a caller that prepares its
// request meanwhile and calls Hold right before it writes: Hold ends at
// the slot's moment, sleeping its last 1.2ms on the OS thread (nanosleep,
// on Linux), because the Go runtime's timers wake up to a millisecond late
// when the process is idle.
//
// # The guarantee
//
// The schedule runs at Rate×(1−Headroom). With every request leaving
// within MaxLateness of its slot, any window of length W at the provider
// holds at most Rate×(1−Headroom)×(W+MaxLateness) + Burst requests, which
// is at most Rate×W + Burst for every W ≥ MaxLateness×(1−Headroom)/Headroom.
// The default Headroom, MaxLateness/100ms, makes that every window of 100ms
// or more: 2% under the cap with the default 2ms. A negative Headroom runs
// at the cap, and the bound then holds only up to Rate×MaxLateness extra.
//
// "Within MaxLateness of its slot" is judged on the slot's true moment, not
// where the replica's map of the Redis clock places it: a slot is used
// from its mapped moment plus the map's error bound until MaxLateness
// after it minus the same bound (Slot.At, Slot.Deadline), so a replica
// whose map errs either way still sends within the bound. The margin is
// the bound itself up to MaxLateness/4, which a replica's map reaches
// before its first slot unless the host or link is slow (see below).
//
// A delay on one leg of a replica's link to Redis cannot be told from a
// clock offset (as for NTP): it could shift that replica's slots by up to
// half its round trip. A replica whose clock map is less certain than four
// times MaxLateness therefore stands aside while precise replicas are live
// (see Aside, ErrAside): the bound holds for the replicas that send. A
// replica samples the clock before its first slot, and one less certain
// than a quarter of MaxLateness takes no slot until a round trip places it
// within that or its map holds enough round trips (32, or 8 to be judged
// as above), so that a replica whose first replies were slow (a host busy
// starting the cluster) places no slot off, and one on a slow link stands
// aside before it has placed any. When every replica is that far from
// Redis, all of them send, each off by up to half its round trip.
//
// A schedule with no state in Redis (the first call ever, or the key lost:
// deleted, evicted, Redis restarted empty or failed over to a replica that
// had not seen it) starts one Horizon after now, because replicas may hold
// slots granted up to one Horizon ahead; each call also passes the latest
// slot its replica holds, and a rolled-back schedule never restarts behind
// it. A call that took only gaps does not move tat, so its loss would not
// show there: each granting call also counts a sequence number up, a
// replica passes the highest it has seen, and a state behind it restarts
// one Horizon after now, without gaps, as after a loss. The cost is one
// Horizon without slots after a loss.
//
// # Control
//
// The configured Rate and Burst travel with every call; an operator's
// override (Controls: SetRate, SetBurst, ClearOverrides, Pause, Resume) and
// Throttle (a provider's Retry-After: nobody gets a slot for d) are written
// to the hash and reach every replica on its next call, so within one
// Horizon. Members lists the live replicas; Announce through a Pacer's
// Members also tells it how many share the schedule.
//
// # Listening to the provider
//
// With Config.Adaptive on, each replica reports its provider's answers
// through a Feedback (Observe, Run) and one effective rate for the whole
// cluster follows them (adapt.lua): the answers of every replica are summed
// into one window and judged once per window, so the rate moves at most
// once per window. A window throttled beyond the tolerance cuts the rate
// to what the provider accepted; the window after a cut checks that it
// helped, and undoes it when the throttling did not follow the rate (that
// share is then tolerated); clean windows raise the rate step by growing
// step back to the ceiling (Rate, or the override). The first Retry-After
// of an episode holds the schedule, once, within Adaptive.MaxHold. The
// effective rate applies only while an episode is open; outside one the
// schedule runs at the ceiling and nothing of the adaptation is read.
//
// # Failure
//
// When Redis errors or cannot be reached, the pacer grants nothing: Wait
// returns an error wrapping ErrUnavailable and the caller retries with
// backoff. sluice would rather be late than exceed the provider's cap. The
// scripts are re-sent after SCRIPT FLUSH or a restart (EVALSHA, then EVAL).
//
// With WhenUnavailable Local, a replica that loses Redis paces itself
// instead, at its share of the last rate Redis reported times
// DegradedSafety, for at most MaxDegraded, and goes back to the schedule
// when Redis answers a probe; see degraded.go for the arithmetic of the
// cap through the entry and the return, and what it does not cover.
package pacer
