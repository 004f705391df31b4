package pacer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pacer is one replica's handle on a cluster-wide schedule of slots kept in
// Redis. Every replica that shares the schedule's Name shares its rate: the
// cluster as a whole is granted at most Rate×(1−Headroom) slots per second,
// evenly spaced, with at most Burst at once after an idle spell.
//
// Most callers want Take (or Wait/WaitN when they do not check lateness
// themselves): it returns when the caller's slot has come, and the caller
// then sends one request, no later than the slot's Deadline. Reserve is the
// single Redis call beneath, for callers that schedule slots themselves.
//
// Take batches: one Redis call may grant this replica several slots (never
// further ahead than Horizon); the replica keeps them locally and hands them
// out to waiters in order. Slot times come on the Redis clock and are mapped
// to this replica's clock from the fastest recent round trips (see
// clockMap). A slot that cannot be used within MaxLateness of its time is
// forfeited, never spent late. When Redis errors or cannot be reached no
// slot is granted and Take returns an error wrapping ErrUnavailable.
//
// Operator controls (rate override, pause) live in Controls and the live
// replicas in Members; Throttle, the provider's feedback, is here.
//
// A Pacer is safe for concurrent use.
type Pacer struct {
	rdb     redis.Scripter
	cfg     Config
	key     string
	gapsKey string

	mu        sync.Mutex
	buf       []slot        // granted, unclaimed slots in local-time order
	strided   bool          // buf holds slots granted with a stride (batchPolicy.stride)
	refilling chan struct{} // non-nil while one refill runs; closed when done
	topUps    chan topUp    // to the idle top-up goroutine (topup.go)
	batch     batchPolicy
	clock     *clockMap
	hint      time.Time      // the latest slot granted to this replica (Redis clock)
	seq       int64          // the highest sequence number a reply has shown (reserve.lua), or past it after a step
	stepEpoch int64          // counts the steps of Redis's clock this replica saw (noteStepLocked)
	lapsed    float64        // slots that lapsed before this replica's calls (Stats.Lapsed)
	owed      map[string]int // slots TakeFor callers still wait for, by tenant (takefor.go)

	// epoch is when the Pacer was made (Config.Clock), and returned when
	// the caller of the last Take to return got its slot, as time since
	// epoch (0: none yet); the batch policy reads it at the next claim
	// (batchPolicy.noteReturn).
	epoch    time.Time
	returned atomic.Int64
	// gave is when the caller of the last Take to return got it, by this
	// replica's clock, as time since epoch (0: none yet): the batch policy
	// measures from it how soon the next claim is asked for
	// (batchPolicy.noteAsk).
	gave atomic.Int64
	// wakeLag, set only by tests, makes every wait that sleeps end that
	// much late, as a loaded machine's timers do (wait.go).
	wakeLag time.Duration

	sharers      atomic.Int64              // replicas drawing on the schedule, as Members last saw
	precisePeers atomic.Int64              // other live replicas with precise clocks (aside.go)
	self         atomic.Pointer[announced] // this replica's id and live window, from Members.Announce
	deg          degraded                  // local mode while Redis is away (degraded.go)

	calls, granted, used, waitNanos atomic.Int64
	unclaimed, stale, late          atomic.Int64
	ineligible                      atomic.Int64 // slots no job was allowed to take (tenants.go)
	rides, idle                     atomic.Int64 // rides granted a slot, and slots of rides that brought no job (ride.go)
	// topUpLoops and topUpRuns count the top-up goroutines started and
	// the top-ups they ran (topup.go), for tests.
	topUpLoops, topUpRuns atomic.Int64

	demand      atomic.Pointer[func() []TenantDemand] // tenants waiting here (tenants.go)
	tenantMu    sync.Mutex
	tenantRates map[string]float64 // tenants' rates as Redis last said
}

// slot is one granted slot: when its request may leave on this replica's
// clock (inside the clock map's error, see marginLocked), and its place on
// the Redis clock (its stamp in the cluster-wide schedule).
type slot struct {
	local    time.Time // the first moment its request may leave
	deadline time.Time // the last
	stamp    time.Time
	tenant   string // the limited tenant the slot is granted to; "" for none
}

// New returns a Pacer for cfg, running its scripts on rdb (a client, a
// cluster client or a ring). It never closes rdb.
func New(rdb redis.Scripter, cfg Config) (*Pacer, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	}
	p := &Pacer{rdb: rdb, cfg: cfg, key: key(cfg.Name), gapsKey: gapsKey(cfg.Name), batch: newBatchPolicy(cfg), clock: newClockMap(), epoch: cfg.Clock.Now(),
		topUps: make(chan topUp)}
	p.sharers.Store(1)
	return p, nil
}

// Config returns the pacer's configuration with defaults filled in.
func (p *Pacer) Config() Config { return p.cfg }

// Wait is WaitN(ctx, 1).
func (p *Pacer) Wait(ctx context.Context) error { return p.WaitN(ctx, 1) }

// WaitN blocks until n slots of the schedule are this caller's and the last
// of them has come, for a job that costs n slots; the caller then sends the
// job at once. It is Take without the slot: callers that can check the
// deadline right before they send should use Take.
func (p *Pacer) WaitN(ctx context.Context, n int) error {
	_, err := p.Take(ctx, n)
	return err
}

// Take blocks until n slots of the schedule are this caller's and the last
// of them has come, and returns that slot: the caller's request may leave
// until its Deadline, and past it the caller calls Forfeit instead. It
// checks ctx first. When ctx ends before the slot, Take returns ctx's error
// and gives the slots it held back to other waiters of this replica (a slot
// is never spent twice). An error wrapping ErrUnavailable means Redis
// failed: nothing was granted for it; retry with backoff.
func (p *Pacer) Take(ctx context.Context, n int) (Slot, error) {
	return p.TakeAhead(ctx, n, 0)
}

// TakeAhead is Take, returning up to ahead (and at most one interval of
// the schedule) before the slot comes: for a caller that prepares its
// request meanwhile and waits for the slot's moment (Hold) right before it
// writes, so that nothing between the wake-up and the write makes the
// request late. The caller must not let
// the request leave before the slot's At. A slot already past its deadline
// when the wait ends is never returned.
func (p *Pacer) TakeAhead(ctx context.Context, n int, ahead time.Duration) (Slot, error) {
	return p.take(ctx, "", n, ahead)
}

// take is TakeAhead, and with a tenant TakeFor: it claims n slots (of
// tenant's, when given), waits until up to ahead before the last, and
// returns it; a slot past its deadline when the wait ends is forfeited and
// n others are claimed.
func (p *Pacer) take(ctx context.Context, tenant string, n int, ahead time.Duration) (Slot, error) {
	if n < 1 {
		return Slot{}, fmt.Errorf("pacer: wait: n must be at least 1, got %d", n)
	}
	var start time.Time
	var one [1]slot // the usual claim, without an allocation
	for {
		if err := ctx.Err(); err != nil {
			return Slot{}, fmt.Errorf("pacer: wait: %w", err)
		}
		held, now, err := p.claim(ctx, tenant, n, one[:0])
		if err != nil {
			return Slot{}, err
		}
		if start.IsZero() {
			start = now
		}
		last := held[len(held)-1]
		early := p.aheadOf(ahead)
		woke, err := p.waitFor(ctx, last.local.Add(-early), now, early <= 0)
		if err != nil {
			p.giveBack(held)
			return Slot{}, fmt.Errorf("pacer: wait: %w", err)
		}
		s := Slot{At: last.local, Deadline: last.deadline, Stamp: last.stamp, Tenant: held[0].tenant}
		if s.Late(woke) { // woke too late: never spend it late
			p.late.Add(int64(n))
			continue
		}
		p.used.Add(int64(n))
		p.waitNanos.Add(int64(woke.Sub(start)))
		if tenant == "" {
			// The caller has its slot: when it came, or when the caller
			// woke after it, having slept for the slot itself (a late
			// timer). A caller that takes its slots ahead (TakeAhead)
			// slept only until ahead of the slot: counted from its waking
			// past the slot, a replica whose fetched jobs come in bunches
			// looked saturated at 40% of the cap and asked with no stride
			// (TestExactSteadyThenBacklog at 5,000/s: 0.30-0.33 calls per
			// job against 0.12-0.22), so its delay counts from the slot,
			// as before.
			got := last.local
			if early <= 0 && got.After(now) && woke.After(got) {
				got = woke
			}
			p.returned.Store(max(1, int64(got.Sub(p.epoch))))
			p.gave.Store(max(1, int64(woke.Sub(p.epoch))))
		}
		return s, nil
	}
}

// aheadOf bounds how far ahead of its slot TakeAhead returns: at most one
// interval of the schedule, so that a replica near its ceiling (slots
// microseconds apart) does not hand over many requests to wait at once;
// where a cap binds, an interval is milliseconds. On a very fast schedule
// (fastLocked: no cap in reach) the whole of ahead: the caller hands over
// the requests of a batch whose first slot is still to come and goes on to
// the next claim, whose call for slots then leaves sooner, where bounded
// by an interval (a microsecond) it waited for each batch's first slot
// (a third of a replica's slot loop at the uncapped ceiling, in an
// execution trace). Nine A/B pairs of the ceiling: higher on Redis in all
// nine, on NATS in seven, late forfeits unchanged (0.12–0.15 per job).
// Bounded by a quarter of the lateness bound instead, it moved nothing.
func (p *Pacer) aheadOf(ahead time.Duration) time.Duration {
	if ahead <= 0 {
		return 0
	}
	p.mu.Lock()
	iv := p.batch.interval
	fast := p.fastLocked()
	p.mu.Unlock()
	if fast {
		return ahead
	}
	return min(ahead, iv)
}

// Hold waits until s comes (its At, on this replica's clock), sleeping its
// last 1.2ms on the OS thread rather than on the runtime's timers (see
// preciseSpan), and returns ctx's error when ctx ends first. It is the last wait before a
// request taken with TakeAhead is written; the caller then checks the
// deadline (s.Late) and writes at once.
func (p *Pacer) Hold(ctx context.Context, s Slot) error {
	_, err := p.waitFor(ctx, s.At, p.cfg.Clock.Now(), true)
	if err != nil {
		return fmt.Errorf("pacer: hold: %w", err)
	}
	return nil
}

// Forfeit records that the caller could not send on s before its deadline:
// the slot is lost, never spent late.
func (p *Pacer) Forfeit(Slot) { p.late.Add(1) }

// claim takes n slots for the caller (granted to tenant, when given),
// refilling from Redis as needed. A refill that brings tenant none waits
// one of the tenant's intervals before the next.
//
// It appends them to held (empty; its room is used when it suffices) and
// also returns the time it read when it took the last of them.
func (p *Pacer) claim(ctx context.Context, tenant string, n int, held []slot) ([]slot, time.Time, error) {
	if cap(held) < n {
		held = make([]slot, 0, n)
	}
	var asked time.Time
	for {
		p.mu.Lock()
		now := p.cfg.Clock.Now()
		if asked.IsZero() {
			asked = now
		}
		p.dropExpiredLocked(now)
		held = p.takeLocked(held, n, tenant)
		if len(held) == n {
			if tenant == "" {
				if r := p.returned.Load(); r > 0 {
					p.batch.noteReturn(p.epoch.Add(time.Duration(r)))
				}
				if g := p.gave.Load(); g > 0 {
					p.batch.noteAsk(asked.Sub(p.epoch.Add(time.Duration(g))))
				}
				p.batch.noteClaim(now)
				p.afterClaimLocked(ctx, held[len(held)-1].local, now)
			}
			p.mu.Unlock()
			return held, now, nil
		}
		if err := p.moreLocked(ctx, now, n-len(held)); err != nil {
			p.giveBack(held)
			return nil, time.Time{}, err
		}
		if tenant != "" && !p.holdsFor(tenant) {
			if err := p.sleepFor(ctx, p.tenantPoll(tenant)); err != nil {
				p.giveBack(held)
				return nil, time.Time{}, fmt.Errorf("pacer: wait: %w", err)
			}
		}
	}
}

// moreLocked brings more slots for a caller that needs need more: it waits
// for the refill under way, or settles the clock map, or refills (from
// Redis, or the local schedule while degraded). It is called with p.mu
// held and returns with it released; the caller then looks at the buffer
// again.
func (p *Pacer) moreLocked(ctx context.Context, now time.Time, need int) error {
	if ch := p.refilling; ch != nil {
		p.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("pacer: wait: %w", ctx.Err())
		}
	}
	if p.unsettledLocked(now) {
		p.mu.Unlock()
		if err := p.settleClock(ctx); err != nil {
			return fmt.Errorf("pacer: wait: %w", err)
		}
		return nil
	}
	if err := p.asideLocked(now); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("pacer: wait: %w", err)
	}
	ch := p.beginRefillLocked()
	want := p.batch.size(need, p.sharersNow(), p.uncertainLocked(now))
	stride, n := p.strideLocked(need, now)
	if stride > 0 {
		want = n
	}
	p.mu.Unlock()

	err := p.obtain(ctx, want, stride) // refill, or the local schedule while degraded
	p.endRefill(ch)
	return err
}

// afterClaimLocked notes in the batch policy whether the caller of a
// claim (not a tenant's: those come at the tenant's rate and tell the
// policy nothing) waits for its slot, held, and tops the buffer up in the
// background (topUpLocked), within the claim's lock and with its reading
// of the clock. p.mu must be held.
func (p *Pacer) afterClaimLocked(ctx context.Context, held, now time.Time) {
	p.batch.noteWait(held.After(now))
	ch, want, stride, from := p.topUpLocked(held, now)
	if ch == nil {
		return
	}
	p.startTopUp(topUp{ctx: ctx, ch: ch, want: want, stride: stride, from: from})
}

// topUpLocked decides whether to refill in the background, while the
// caller sleeps until its slot: when the latest slot this replica holds
// (held, or the last buffered) is less than half a horizon away, so that
// the schedule runs on without a gap for the Redis round trip. A replica
// that asks with a stride tops up from a stride past its latest slot,
// while slots are still buffered; otherwise only once the caller took the
// last buffered slot, and not when batches are of one slot. A replica that
// holds slots granted with a stride and whose claims wait for them (a
// backlog came) tops up with slots one interval apart whenever the next
// slot it holds is more than two intervals after held, so that the holes
// between its strided slots are not left unused while it drains them;
// such a top-up asks for a saturated replica's whole share at once (the
// batch size its strided spell had shrunk is not grown back one doubling
// per call).
// Never while a refill is under way. It begins the refill and returns its
// channel, size, stride and first moment (Redis clock), or a nil channel.
// The refill is bounded by one horizon (its slots would be stale after
// that) and its failures are left to the next claim to meet. p.mu must be
// held.
func (p *Pacer) topUpLocked(held, now time.Time) (chan struct{}, int, time.Duration, time.Time) {
	if len(p.buf) == 0 {
		p.strided = false
	}
	if p.refilling != nil || p.uncertainLocked(now) || p.deg.on {
		return nil, 0, 0, time.Time{}
	}
	latest := held
	if len(p.buf) > 0 {
		latest = p.buf[len(p.buf)-1].local
	}
	stride, n := p.strideLocked(1, now)
	switch {
	case stride > 0 && !p.hint.IsZero():
		if latest.Sub(now) >= p.cfg.Horizon/2 {
			return nil, 0, 0, time.Time{}
		}
		return p.beginRefillLocked(), n, stride, p.hint.Add(stride)
	case p.strided && p.batch.backlogged():
		if p.buf[0].local.Sub(held) <= 2*p.batch.interval {
			return nil, 0, 0, time.Time{}
		}
		return p.beginRefillLocked(), p.batch.saturatedSize(p.sharersNow()), 0, time.Time{}
	}
	if latest.Sub(now) >= p.cfg.Horizon/2 || len(p.buf) > 0 || p.batch.limit(p.sharersNow()) < 2 {
		return nil, 0, 0, time.Time{}
	}
	return p.beginRefillLocked(), p.batch.size(1, p.sharersNow(), false), 0, time.Time{}
}

// strideLocked is the batch policy's stride and size for a refill for
// need slots (see batchPolicy.stride); 0 when the clock map is too
// uncertain to place slots within the lateness bound, and with tenant
// limits, whose slots reserve.lua hands out as they come. p.mu must be
// held.
func (p *Pacer) strideLocked(need int, now time.Time) (time.Duration, int) {
	if p.cfg.Tenants.On() || p.uncertainLocked(now) {
		return 0, 0
	}
	return p.batch.stride(need, p.sharersNow())
}

// beginRefillLocked makes the caller the one refilling; others wait on the
// returned channel until endRefill closes it.
func (p *Pacer) beginRefillLocked() chan struct{} {
	ch := make(chan struct{})
	p.refilling = ch
	return ch
}

// endRefill ends the refill begun with ch and wakes the waiters.
func (p *Pacer) endRefill(ch chan struct{}) {
	p.mu.Lock()
	p.refilling = nil
	p.mu.Unlock()
	close(ch)
}

// refill makes one Reserve call (asking with stride) and adds its slots
// to the buffer; when nothing is granted it waits until asking again can
// succeed.
func (p *Pacer) refill(ctx context.Context, want int, stride time.Duration) error {
	r, err := p.reserve(ctx, want, stride, time.Time{})
	if err != nil {
		return err
	}
	if r.Granted == 0 {
		if !r.Paused { // the schedule is full: this replica waits for slots
			p.mu.Lock()
			p.batch.noteWait(true)
			p.mu.Unlock()
		}
		if err := p.sleepFor(ctx, r.RetryAfter+p.spread(r)); err != nil {
			return fmt.Errorf("pacer: wait: %w", err)
		}
		return nil
	}
	p.addSlots(r, stride > 0)
	return nil
}

// spread is how much later than RetryAfter a replica refused by a full
// schedule asks again: a random share of the time the other replicas'
// turns take (one interval each), at most half a horizon. Without it every
// waiting replica asks the moment one slot frees, one wins and the others
// ask again: with 64 replicas, 25 script calls per slot (10 with it). A
// slot freed at the horizon's edge is taken a little later but keeps its
// time, so nothing is lost while the wait stays well under the horizon.
func (p *Pacer) spread(r Reservation) time.Duration {
	others := p.sharersNow() - 1
	if r.Paused || others < 1 || r.Interval <= 0 {
		return 0
	}
	d := min(time.Duration(others)*r.Interval, p.cfg.Horizon/2)
	return time.Duration(rand.Int64N(int64(d) + 1))
}

// addSlots adds a reservation's slots to the buffer, each at its Redis time
// mapped to this replica's clock, keeping the buffer in time order (slots
// one interval apart may fall between slots held from a grant with a
// stride); strided says the grant was asked with a stride. A slot already
// past its lateness bound when the reply arrived is forfeited as stale.
func (p *Pacer) addSlots(r Reservation, strided bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if strided && r.Granted > 0 {
		p.strided = true
	}
	had := len(p.buf)
	now := p.cfg.Clock.Now()
	m := p.marginLocked(now)
	p.batch.noteInterval(r.Interval)
	for i := range r.Granted {
		st := r.Slot(i)
		p.raiseHintLocked(st)
		local := p.clock.local(st)
		s := slot{local: local.Add(m), deadline: local.Add(p.cfg.MaxLateness - m), stamp: st, tenant: r.tenant(i)}
		if now.After(s.deadline) {
			p.stale.Add(1)
			continue
		}
		p.buf = append(p.buf, s)
	}
	if had > 0 && len(p.buf) > had && p.buf[had].local.Before(p.buf[had-1].local) {
		p.sortBufLocked()
	}
}

// marginLocked is how far inside its lateness bound, at each end, a slot
// mapped from the Redis clock now is used: the clock map's error bound,
// at most MaxLateness/settledFactor. A slot's request leaves from its
// mapped moment plus the margin until MaxLateness minus the margin after
// it, so that wherever in its error bound the map is, the request leaves
// within MaxLateness after the slot's true moment, never before it: two
// replicas whose maps err in opposite directions cannot bunch their
// requests closer than the lateness bound allows. A map less certain than
// MaxLateness/settledFactor (a loaded machine, or a link slow enough to
// stand aside on) is compensated up to that only. p.mu must be held.
func (p *Pacer) marginLocked(now time.Time) time.Duration {
	_, u := p.clock.offset(now)
	return min(u, p.cfg.MaxLateness/settledFactor)
}

// raiseHintLocked records st as the latest slot granted to this replica
// when it is later than the one known. p.mu must be held.
func (p *Pacer) raiseHintLocked(st time.Time) {
	if st.After(p.hint) {
		p.hint = st
	}
}

// sortBufLocked puts the buffer back in local-time order. p.mu must be
// held.
func (p *Pacer) sortBufLocked() {
	slices.SortFunc(p.buf, func(a, b slot) int { return a.local.Compare(b.local) })
}

// giveBack returns claimed slots to the buffer for other waiters.
func (p *Pacer) giveBack(held []slot) {
	if len(held) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, held...)
	p.sortBufLocked()
}

// dropExpiredLocked forfeits unclaimed slots past their deadline.
func (p *Pacer) dropExpiredLocked(now time.Time) {
	i := 0
	for i < len(p.buf) && now.After(p.buf[i].deadline) {
		i++
	}
	if i > 0 {
		p.buf = p.buf[i:]
		p.batch.noteDropped(i)
		p.unclaimed.Add(int64(i))
	}
}

// uncertainLocked reports whether the clock map's error bound exceeds the
// lateness bound: slots cannot be placed precisely enough to come in
// batches.
func (p *Pacer) uncertainLocked(now time.Time) bool {
	_, u := p.clock.offset(now)
	return u > p.cfg.MaxLateness
}

func (p *Pacer) sharersNow() int { return int(p.sharers.Load()) }
