package pacer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pacer is one replica's handle on a cluster-wide schedule of slots kept in
// Redis. Every replica that shares the schedule's Name shares its rate: the
// cluster as a whole is granted at most Rate slots per second, evenly
// spaced, with at most Burst at once after an idle spell.
//
// Most callers want Wait (or WaitN for a job that costs several slots): it
// returns when the caller's slot has come, and the caller then sends one
// request. Reserve is the single Redis call beneath, for callers that
// schedule slots themselves.
//
// Wait batches: one Redis call may grant this replica several slots (never
// further ahead than Horizon); the replica keeps them locally and hands them
// out to waiters in order. A slot nobody claims within Grace of its time is
// dropped, never spent late. When Redis errors or cannot be reached no slot
// is granted and Wait returns an error wrapping ErrUnavailable.
//
// A Pacer is safe for concurrent use.
type Pacer struct {
	rdb redis.Scripter
	cfg Config
	key string

	mu        sync.Mutex
	buf       []slot        // granted, unclaimed slots in local-time order
	refilling chan struct{} // non-nil while one waiter refills; closed when done
	next      int           // batch size to ask for on the next refill
	dropped   int           // slots dropped since the last refill
	lastClaim time.Time     // when a waiter last took slots
	claimGap  time.Duration // moving average of the time between claims
	interval  time.Duration // between slots, as the last grant said
	waitScore float64       // moving average of claims that had to wait for their slot (1) or not (0)
	sharers   atomic.Int64  // replicas drawing on the schedule, as Announce last saw

	calls, granted, used, expired, waitNanos, forfeitLate atomic.Int64
}

// slot is one granted slot: when it falls on this replica's clock, and on
// the Redis clock (its stamp in the cluster-wide schedule).
type slot struct {
	local time.Time
	stamp time.Time
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
	p := &Pacer{rdb: rdb, cfg: cfg, key: key(cfg.Name), next: 1}
	p.sharers.Store(1)
	return p, nil
}

// Config returns the pacer's configuration with defaults filled in.
func (p *Pacer) Config() Config { return p.cfg }

// Reservation is the answer to one Reserve call: Granted slots, the first at
// First and each next one Interval later, all on the Redis clock.
type Reservation struct {
	Granted    int
	First      time.Time     // Redis time of the first granted slot; may be before Now (burst)
	Interval   time.Duration // between granted slots
	Now        time.Time     // Redis time when the slots were granted
	RetryAfter time.Duration // with Granted == 0: when asking again can succeed
	Rate       float64       // the effective rate (the override when one is set)
	Paused     bool          // the schedule is paused; nothing is granted
}

// Slot returns the Redis-clock time of granted slot i (0-based); a slot due
// before the reservation was made is due at Now.
func (r Reservation) Slot(i int) time.Time {
	t := r.First.Add(time.Duration(i) * r.Interval)
	if t.Before(r.Now) {
		return r.Now
	}
	return t
}

// Delay returns how long after Now granted slot i is due.
func (r Reservation) Delay(i int) time.Duration { return r.Slot(i).Sub(r.Now) }

// Reserve asks the schedule for up to n slots in one Redis call and moves
// the schedule past the slots it grants. The slots are the caller's to use,
// each at its time; slots not used are lost, never granted again. It grants
// none while paused, throttled beyond the horizon or when the schedule is
// full to the horizon; RetryAfter then says when to ask again.
func (p *Pacer) Reserve(ctx context.Context, n int) (Reservation, error) {
	if n < 1 {
		return Reservation{}, fmt.Errorf("pacer: reserve: n must be at least 1, got %d", n)
	}
	p.calls.Add(1)
	v, err := reserveScript.Run(ctx, p.rdb, []string{p.key},
		p.cfg.Rate, p.cfg.Burst, n, p.cfg.Horizon.Microseconds(), pausePoll.Microseconds()).Result()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Reservation{}, fmt.Errorf("pacer: reserve: %w", ctxErr)
		}
		return Reservation{}, fmt.Errorf("pacer: reserve: %w: %w", ErrUnavailable, err)
	}
	r, err := parseReservation(v)
	if err != nil {
		return Reservation{}, fmt.Errorf("pacer: reserve: %w", err)
	}
	p.granted.Add(int64(r.Granted))
	return r, nil
}

func parseReservation(v any) (Reservation, error) {
	fields, err := replyStrings(v, 7)
	if err != nil {
		return Reservation{}, err
	}
	f, err := parseFields(fields[:6])
	if err != nil {
		return Reservation{}, err
	}
	if f[0] < 0 || f[0] != float64(int(f[0])) || f[2] <= 0 {
		return Reservation{}, fmt.Errorf("%w: granted %v, interval %v", ErrBadReply, f[0], f[2])
	}
	return Reservation{
		Granted:    int(f[0]),
		First:      usTime(f[1]),
		Interval:   usDur(f[2]),
		Now:        usTime(f[3]),
		RetryAfter: usDur(f[4]),
		Rate:       f[5],
		Paused:     fields[6] == "paused",
	}, nil
}

// Wait is WaitN(ctx, 1).
func (p *Pacer) Wait(ctx context.Context) error { return p.WaitN(ctx, 1) }

// WaitN blocks until n slots of the schedule are this caller's and the last
// of them has come, for a job that costs n slots; the caller then sends the
// job. It checks ctx first. When ctx ends before then, WaitN returns its
// error and gives the slots it held back to other waiters of this replica
// (a slot is never spent twice). An error wrapping ErrUnavailable means
// Redis failed: nothing was granted for it; retry with backoff.
func (p *Pacer) WaitN(ctx context.Context, n int) error {
	_, err := p.waitN(ctx, n)
	return err
}

// waitN is WaitN returning the last slot spent.
func (p *Pacer) waitN(ctx context.Context, n int) (Slot, error) {
	if n < 1 {
		return Slot{}, fmt.Errorf("pacer: wait: n must be at least 1, got %d", n)
	}
	if err := ctx.Err(); err != nil {
		return Slot{}, fmt.Errorf("pacer: wait: %w", err)
	}
	start := p.cfg.Clock.Now()
	held, err := p.claim(ctx, n)
	if err != nil {
		return Slot{}, err
	}
	last := held[len(held)-1]
	p.mu.Lock()
	p.noteWaitLocked(last.local.After(p.cfg.Clock.Now()))
	p.mu.Unlock()
	p.topUp(ctx, last.local)
	if err := p.sleepUntil(ctx, last.local); err != nil {
		p.giveBack(held)
		return Slot{}, fmt.Errorf("pacer: wait: %w", err)
	}
	p.used.Add(int64(n))
	p.waitNanos.Add(int64(p.cfg.Clock.Now().Sub(start)))
	return Slot{At: last.local, Deadline: last.local.Add(p.cfg.MaxLateness), Stamp: last.stamp}, nil
}

// claim takes n slots for the caller, refilling from Redis as needed.
func (p *Pacer) claim(ctx context.Context, n int) ([]slot, error) {
	held := make([]slot, 0, n)
	for {
		p.mu.Lock()
		p.dropExpiredLocked(p.cfg.Clock.Now())
		take := min(n-len(held), len(p.buf))
		held = append(held, p.buf[:take]...)
		p.buf = p.buf[take:]
		if len(held) == n {
			p.noteClaimLocked(p.cfg.Clock.Now())
			p.mu.Unlock()
			return held, nil
		}
		if ch := p.refilling; ch != nil {
			p.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				p.giveBack(held)
				return nil, fmt.Errorf("pacer: wait: %w", ctx.Err())
			}
		}
		ch := p.beginRefillLocked()
		want := p.batchLocked(n - len(held))
		p.mu.Unlock()

		err := p.refill(ctx, want)
		p.endRefill(ch)
		if err != nil {
			p.giveBack(held)
			return nil, err
		}
	}
}

// topUp refills the buffer ahead of need, while the caller would sleep
// anyway, when the caller took the last buffered slot and that slot (held)
// is less than half a horizon away: the schedule then runs on without a gap
// for the Redis round trip. It skips when another refill is under way and
// ignores failures (the next claim reports them).
func (p *Pacer) topUp(ctx context.Context, held time.Time) {
	p.mu.Lock()
	if p.batchLimitLocked() < 2 || p.refilling != nil || len(p.buf) > 0 || held.Sub(p.cfg.Clock.Now()) >= p.cfg.Horizon/2 {
		p.mu.Unlock()
		return
	}
	ch := p.beginRefillLocked()
	want := p.batchLocked(1)
	p.mu.Unlock()

	if r, err := p.Reserve(ctx, want); err == nil {
		p.addSlots(r)
	}
	p.endRefill(ch)
}

// beginRefillLocked makes the caller the one refilling waiter; others wait
// on the returned channel until endRefill closes it.
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

// noteWaitLocked updates the moving average of claims that had to wait
// for their slot (or found the schedule full), which tells a saturated
// replica from one with little demand.
func (p *Pacer) noteWaitLocked(waited bool) {
	w := 0.0
	if waited {
		w = 1
	}
	p.waitScore = 0.8*p.waitScore + 0.2*w
}

// batchLocked picks how many slots to ask for: at least need; more while
// nothing was wasted (doubling), fewer after waste (halving), and never more
// than this replica's waiters can claim before the slots expire. A replica
// with little demand so takes only what it needs and does not move the
// shared schedule ahead of jobs that other replicas are about to send.
func (p *Pacer) batchLocked(need int) int {
	if p.dropped > 0 {
		p.next = max(1, p.next/2)
	} else {
		p.next = min(p.cfg.MaxBatch, p.next*2)
	}
	p.dropped = 0
	return max(need, min(p.next, p.batchLimitLocked()))
}

// batchLimitLocked bounds a batch. A saturated replica (most of its recent
// claims had to wait for their slots) takes at most its fair share of the
// horizon, the horizon's
// slots over the replicas drawing on the schedule, so that replicas that
// all have work get the slots evenly. A replica with little demand takes
// only what it can use before the slots expire (usefulBatchLocked).
func (p *Pacer) batchLimitLocked() int {
	if p.waitScore < 0.7 || p.interval <= 0 {
		return p.usefulBatchLocked()
	}
	fair := int(float64(p.cfg.Horizon) / float64(p.interval) / float64(p.sharers.Load()))
	return min(p.cfg.MaxBatch, max(1, fair))
}

// usefulBatchLocked is the most slots this replica could claim before they
// expire: its waiters claim one every claimGap while the slots come one
// every interval, so the k-th slot is claimed k×(claimGap-interval) late,
// which must stay within Grace.
func (p *Pacer) usefulBatchLocked() int {
	lag := p.claimGap - p.interval - p.interval/10
	if p.lastClaim.IsZero() || lag <= 0 {
		return p.cfg.MaxBatch
	}
	return min(p.cfg.MaxBatch, int(p.cfg.MaxLateness/lag))
}

// noteClaimLocked updates the moving average of the time between claims.
func (p *Pacer) noteClaimLocked(now time.Time) {
	if !p.lastClaim.IsZero() {
		gap := now.Sub(p.lastClaim)
		if p.claimGap == 0 {
			p.claimGap = gap
		} else {
			p.claimGap = (4*p.claimGap + gap) / 5
		}
	}
	p.lastClaim = now
}

// refill makes one Reserve call and adds its slots to the buffer; when
// nothing is granted it waits until asking again can succeed.
func (p *Pacer) refill(ctx context.Context, want int) error {
	r, err := p.Reserve(ctx, want)
	if err != nil {
		return err
	}
	if r.Granted == 0 {
		if !r.Paused { // the schedule is full: this replica waits for slots
			p.mu.Lock()
			p.noteWaitLocked(true)
			p.mu.Unlock()
		}
		if err := p.sleepFor(ctx, r.RetryAfter); err != nil {
			return fmt.Errorf("pacer: wait: %w", err)
		}
		return nil
	}
	p.addSlots(r)
	return nil
}

// addSlots adds a reservation's slots to the buffer. Redis time maps to
// this replica's clock from the moment the answer arrived, so slots fall no
// earlier here than in the schedule.
func (p *Pacer) addSlots(r Reservation) {
	recv := p.cfg.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.interval = r.Interval
	for i := range r.Granted {
		p.buf = append(p.buf, slot{local: recv.Add(r.Delay(i)), stamp: r.Slot(i)})
	}
}

// giveBack returns claimed slots to the buffer for other waiters.
func (p *Pacer) giveBack(held []slot) {
	if len(held) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, held...)
	slices.SortFunc(p.buf, func(a, b slot) int { return a.local.Compare(b.local) })
}

// dropExpiredLocked drops unclaimed slots more than Grace past their time.
func (p *Pacer) dropExpiredLocked(now time.Time) {
	i := 0
	for i < len(p.buf) && now.Sub(p.buf[i].local) > p.cfg.MaxLateness {
		i++
	}
	if i > 0 {
		p.buf = p.buf[i:]
		p.dropped += i
		p.expired.Add(int64(i))
	}
}

func (p *Pacer) sleepUntil(ctx context.Context, t time.Time) error {
	return p.sleepFor(ctx, t.Sub(p.cfg.Clock.Now()))
}

func (p *Pacer) sleepFor(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats are this replica's counters since New, and its view of the Redis
// clock.
type Stats struct {
	Calls    int64         // Redis calls made to reserve slots
	Granted  int64         // slots granted to this replica
	Used     int64         // slots spent by waiters
	Expired  int64         // granted slots dropped unclaimed (forfeited, reason "unclaimed")
	WaitTime time.Duration // total time waiters spent in WaitN
	// Forfeited counts slots given up, by reason: "unclaimed" (no waiter
	// took it before its deadline), "stale" (the reply that granted it
	// came after its deadline), "late" (the caller could not send before
	// its deadline and called Forfeit).
	Forfeited map[string]int64
	// ClockOffset is the Redis clock minus this replica's clock, as
	// estimated from the fastest recent round trips.
	ClockOffset time.Duration
	// ClockUncertainty bounds the error of ClockOffset: half the round
	// trip of the sample it came from.
	ClockUncertainty time.Duration
}

// Stats returns this replica's counters.
func (p *Pacer) Stats() Stats {
	return Stats{
		Calls: p.calls.Load(), Granted: p.granted.Load(), Used: p.used.Load(),
		Expired: p.expired.Load(), WaitTime: time.Duration(p.waitNanos.Load()),
		Forfeited: map[string]int64{"unclaimed": p.expired.Load(), "stale": 0, "late": p.forfeitLate.Load()},
	}
}
