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
	rdb redis.Scripter
	cfg Config
	key string

	mu        sync.Mutex
	buf       []slot        // granted, unclaimed slots in local-time order
	refilling chan struct{} // non-nil while one refill runs; closed when done
	batch     batchPolicy
	clock     *clockMap
	hint      time.Time // the latest slot granted to this replica (Redis clock)

	sharers atomic.Int64 // replicas drawing on the schedule, as Members last saw

	calls, granted, used, waitNanos atomic.Int64
	unclaimed, stale, late          atomic.Int64
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
	p := &Pacer{rdb: rdb, cfg: cfg, key: key(cfg.Name), batch: newBatchPolicy(cfg), clock: newClockMap()}
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
	if n < 1 {
		return Slot{}, fmt.Errorf("pacer: wait: n must be at least 1, got %d", n)
	}
	start := p.cfg.Clock.Now()
	for {
		if err := ctx.Err(); err != nil {
			return Slot{}, fmt.Errorf("pacer: wait: %w", err)
		}
		held, err := p.claim(ctx, n)
		if err != nil {
			return Slot{}, err
		}
		last := held[len(held)-1]
		p.mu.Lock()
		p.batch.noteWait(last.local.After(p.cfg.Clock.Now()))
		p.batch.noteSlot(last.local)
		p.mu.Unlock()
		p.topUp(ctx, last.local)
		if err := p.sleepUntil(ctx, last.local); err != nil {
			p.giveBack(held)
			return Slot{}, fmt.Errorf("pacer: wait: %w", err)
		}
		s := Slot{At: last.local, Deadline: last.local.Add(p.cfg.MaxLateness), Stamp: last.stamp}
		if s.Late(p.cfg.Clock.Now()) { // woke too late: never spend it late
			p.late.Add(int64(n))
			continue
		}
		p.used.Add(int64(n))
		p.waitNanos.Add(int64(p.cfg.Clock.Now().Sub(start)))
		return s, nil
	}
}

// Forfeit records that the caller could not send on s before its deadline:
// the slot is lost, never spent late.
func (p *Pacer) Forfeit(Slot) { p.late.Add(1) }

// claim takes n slots for the caller, refilling from Redis as needed.
func (p *Pacer) claim(ctx context.Context, n int) ([]slot, error) {
	held := make([]slot, 0, n)
	for {
		p.mu.Lock()
		now := p.cfg.Clock.Now()
		p.dropExpiredLocked(now)
		take := min(n-len(held), len(p.buf))
		held = append(held, p.buf[:take]...)
		p.buf = p.buf[take:]
		if len(held) == n {
			p.batch.noteClaim(now)
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
		want := p.batch.size(n-len(held), p.sharersNow(), p.uncertainLocked(now))
		p.mu.Unlock()

		err := p.refill(ctx, want)
		p.endRefill(ch)
		if err != nil {
			p.giveBack(held)
			return nil, err
		}
	}
}

// topUp starts a refill in the background, while the caller sleeps until
// its slot, when the caller took the last buffered slot and that slot
// (held) is less than half a horizon away: the schedule then runs on
// without a gap for the Redis round trip. It does nothing when a refill is
// under way or batches are of one slot. The refill is bounded by one
// horizon (its slots would be stale after that) and its failures are left
// to the next claim to meet.
func (p *Pacer) topUp(ctx context.Context, held time.Time) {
	p.mu.Lock()
	now := p.cfg.Clock.Now()
	if p.refilling != nil || len(p.buf) > 0 || held.Sub(now) >= p.cfg.Horizon/2 ||
		p.uncertainLocked(now) || p.batch.limit(p.sharersNow()) < 2 {
		p.mu.Unlock()
		return
	}
	ch := p.beginRefillLocked()
	want := p.batch.size(1, p.sharersNow(), false)
	p.mu.Unlock()

	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.Horizon)
		defer cancel()
		if r, err := p.Reserve(rctx, want); err == nil {
			p.addSlots(r)
		}
		p.endRefill(ch)
	}()
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
			p.batch.noteWait(true)
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

// addSlots adds a reservation's slots to the buffer, each at its Redis time
// mapped to this replica's clock. A slot already past its lateness bound
// when the reply arrived is forfeited as stale.
func (p *Pacer) addSlots(r Reservation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Clock.Now()
	p.batch.noteInterval(r.Interval)
	for i := range r.Granted {
		st := r.Slot(i)
		if st.After(p.hint) {
			p.hint = st
		}
		local := p.clock.local(st)
		if now.Sub(local) > p.cfg.MaxLateness {
			p.stale.Add(1)
			continue
		}
		p.buf = append(p.buf, slot{local: local, stamp: st})
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

// dropExpiredLocked forfeits unclaimed slots more than MaxLateness past
// their time.
func (p *Pacer) dropExpiredLocked(now time.Time) {
	i := 0
	for i < len(p.buf) && now.Sub(p.buf[i].local) > p.cfg.MaxLateness {
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
