package pacer

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// rideAt runs p's ride call behind a PING at the timeline's time now,
// without landing or settling it, and returns what it decided.
func rideAt(t *testing.T, p *Pacer) (Reservation, bool, bool) {
	t.Helper()
	ctx := context.Background()
	p.mu.Lock()
	c := p.rideCallLocked()
	p.mu.Unlock()
	pipe := p.rdb.(*redis.Client).Pipeline()
	pipe.Ping(ctx)
	exec := c.send(ctx, pipe, p.key, p.rideKey)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := exec.Result()
	if err != nil {
		t.Fatal(err)
	}
	res, took, locked, err := c.decide(v)
	if err != nil {
		t.Fatal(err)
	}
	return res, took, locked
}

// Two replicas ride at one idle moment: the first takes it, the second
// finds the lock and takes nothing. A call made while the first ride's
// lock stands (its settle not come) grants nothing within an interval
// after the ride's slot, and drops the lock: the next ride reads the
// schedule's tat again.
func TestRideLockKeepsOthersAnIntervalBehind(t *testing.T) {
	cfg := Config{Rate: 1000, Horizon: 20 * ms}
	a, m := newTimeline(t, cfg)
	b := sharer(t, m, cfg)
	settle(t, a)
	settle(t, b)
	m.SetTime(t0.Add(50 * ms))
	ra, took, locked := rideAt(t, a)
	if !took || !locked || !ra.Slot(0).Equal(t0.Add(50*ms)) {
		t.Fatalf("first ride at an idle 50ms: %+v, took %v, locked %v; want its slot at 50ms", ra, took, locked)
	}
	if _, took, locked := rideAt(t, b); took || locked {
		t.Fatalf("second ride at the same moment: took %v, locked %v; want neither", took, locked)
	}
	// 0.5ms later, before A's settle: B's call is an interval past A's
	// slot (51ms), or up to 1ms more (the lock counts whole milliseconds).
	m.SetTime(t0.Add(50*ms + 500*time.Microsecond))
	r, err := b.Reserve(context.Background(), 1)
	if err != nil || r.Granted != 1 || r.Slot(0).Before(t0.Add(51*ms)) || r.Slot(0).After(t0.Add(52*ms)) {
		t.Fatalf("a call beside the ride's lock: %+v, %v; want one slot at 51–52ms", r, err)
	}
	if m.Exists(rideKey("timeline")) {
		t.Fatal("the call left the ride's lock")
	}
}

// A ride's settle writes its slot into the schedule exactly: tat one
// interval after it, seq counted, the lock gone; a settle of a ride that
// took nothing only drops its lock. A settle that comes after another
// call already dropped the lock still moves tat past its slot.
func TestRideSettle(t *testing.T) {
	cfg := Config{Rate: 1000, Horizon: 20 * ms}
	a, m := newTimeline(t, cfg)
	settle(t, a)
	tat := func() float64 {
		v, _ := strconv.ParseFloat(m.HGet(key("timeline"), "tat"), 64)
		return v
	}
	seq := func() string { return m.HGet(key("timeline"), "seq") }

	m.SetTime(t0.Add(50 * ms))
	a.mu.Lock()
	a.clock.nlead = 0 // no lead: the slot is at the ride's moment
	a.mu.Unlock()
	r, took, _ := rideAt(t, a)
	if !took {
		t.Fatal("no ride at an idle moment")
	}
	before := seq()
	a.settleRide(a.rideTokenLast(), r.Slot(0))
	if got, want := tat(), float64(t0.Add(51*ms).UnixMicro()); got != want || seq() == before || m.Exists(rideKey("timeline")) {
		t.Fatalf("after the settle: tat %v (want %v), seq %s → %s, lock there %v", got, want, before, seq(), m.Exists(rideKey("timeline")))
	}

	// A ride that finds the schedule held takes nothing; its settle drops
	// its lock and moves nothing.
	m.SetTime(t0.Add(50*ms + 500*time.Microsecond))
	if _, took, locked := rideAt(t, a); took || !locked {
		t.Fatalf("a ride while held: took %v, locked %v; want a lock and nothing taken", took, locked)
	}
	held := tat()
	a.settleRide(a.rideTokenLast(), time.Time{})
	if tat() != held || m.Exists(rideKey("timeline")) {
		t.Fatalf("settle of a ride that took nothing: tat %v → %v, lock there %v", held, tat(), m.Exists(rideKey("timeline")))
	}

	// A late settle, its lock dropped by a call: tat still ends past it.
	m.SetTime(t0.Add(60 * ms))
	r, took, _ = rideAt(t, a)
	token := a.rideTokenLast()
	if !took {
		t.Fatal("no ride at an idle 60ms")
	}
	m.Del(rideKey("timeline"))
	a.settleRide(token, r.Slot(0))
	if got, want := tat(), float64(t0.Add(61*ms).UnixMicro()); got < want {
		t.Fatalf("late settle: tat %v, want at least %v", got, want)
	}
}

// No ride takes a moment while the schedule is paused, once its state is
// lost, or when an operator slowed it past what the ride's lock covers.
func TestRideRefusedWhenPausedLostOrSlowed(t *testing.T) {
	cfg := Config{Rate: 1000, Horizon: 20 * ms}
	a, m := newTimeline(t, cfg)
	settle(t, a)
	at := 50 * ms
	next := func() {
		at += 50 * ms
		m.SetTime(t0.Add(at))
	}

	next()
	m.HSet(key("timeline"), "paused", "1")
	if _, took, _ := rideAt(t, a); took {
		t.Fatal("a ride took a moment of a paused schedule")
	}
	m.HDel(key("timeline"), "paused")

	next()
	m.HSet(key("timeline"), "rate_override", "100") // 10ms between slots; the lock covers about 2
	if _, took, _ := rideAt(t, a); took {
		t.Fatal("a ride took a moment of a schedule slowed past its lock")
	}
	m.HDel(key("timeline"), "rate_override")

	next()
	if _, took, _ := rideAt(t, a); !took {
		t.Fatal("no ride once the schedule was idle at its rate again")
	}

	next()
	m.Del(key("timeline"))
	if _, took, _ := rideAt(t, a); took {
		t.Fatal("a ride took a moment of a lost state")
	}
}

// rideTokenLast is the token of p's latest ride.
func (p *Pacer) rideTokenLast() string {
	return strconv.FormatUint(p.rideID, 36) + "." + strconv.FormatInt(p.rideN.Load(), 36)
}

// Four replicas at random moments: rides (settled at once, a few calls
// later, or never, as when a replica dies), calls for random counts with
// and without strides, and throttles. No two slots, rides' included, are
// closer than one interval, and no slot taken after a throttle falls
// inside it.
func TestRidesNeverCloserThanAnInterval(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Rate: 1000, Horizon: 20 * ms}
	first, m := newTimeline(t, cfg)
	ps := []*Pacer{first, sharer(t, m, cfg), sharer(t, m, cfg), sharer(t, m, cfg)}
	for _, p := range ps {
		settle(t, p)
	}
	type pending struct {
		p     *Pacer
		token string
		slot  time.Time
		after int // steps until it is settled
	}
	var later []pending
	rng := rand.New(rand.NewPCG(3, 4))
	strides := []time.Duration{0, 0, 2 * ms, 3 * ms}
	var all []time.Time
	var held time.Time
	at := 100 * ms
	rides, late, never := 0, 0, 0
	for range 3000 {
		at += time.Duration(rng.IntN(4000)) * time.Microsecond
		m.SetTime(t0.Add(at))
		for i := 0; i < len(later); i++ {
			if later[i].after--; later[i].after <= 0 {
				later[i].p.settleRide(later[i].token, later[i].slot)
				later = slices.Delete(later, i, i+1)
				i--
			}
		}
		p := ps[rng.IntN(len(ps))]
		switch k := rng.IntN(100); {
		case k < 2:
			until, err := p.Throttle(ctx, time.Duration(1+rng.IntN(10))*ms)
			if err != nil {
				t.Fatal(err)
			}
			held = until
		case k < 45:
			r, took, locked := rideAt(t, p)
			if !locked {
				continue
			}
			var slot time.Time
			if took {
				rides++
				slot = r.Slot(0)
				if slot.Before(held) {
					t.Fatalf("a ride's slot at t0+%s inside a throttle to t0+%s", slot.Sub(t0), held.Sub(t0))
				}
				all = append(all, slot)
			}
			switch j := rng.IntN(10); {
			case j < 6:
				p.settleRide(p.rideTokenLast(), slot)
			case j < 9:
				late++
				later = append(later, pending{p: p, token: p.rideTokenLast(), slot: slot, after: 1 + rng.IntN(4)})
			default:
				never++
			}
		default:
			stride := strides[rng.IntN(len(strides))]
			r, err := p.reserve(ctx, 1+rng.IntN(4), stride, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			for k := range r.Granted {
				s := r.First.Add(time.Duration(k) * r.Interval)
				if r.Stamps != nil {
					s = r.Stamps[k]
				}
				if s.Before(held) {
					t.Fatalf("slot at t0+%s granted inside a throttle to t0+%s", s.Sub(t0), held.Sub(t0))
				}
				all = append(all, s)
			}
		}
	}
	if rides < 150 || late < 50 || never < 20 {
		t.Fatalf("rides %d (settled late %d, never %d): the rides were hardly tried", rides, late, never)
	}
	slices.SortFunc(all, time.Time.Compare)
	for k := 1; k < len(all); k++ {
		if d := all[k].Sub(all[k-1]); d < ms-time.Microsecond {
			t.Fatalf("slots at t0+%s and t0+%s, %s apart: closer than one interval (1ms)", all[k-1].Sub(t0), all[k].Sub(t0), d)
		}
	}
	t.Logf("%d slots over %s, %d of them rides (%d settled late, %d never)", len(all), at, rides, late, never)
}

// A ride takes its moment only when its lock, as Redis counted its
// expiry, outlives its slot by an interval: a Redis that counted the
// expiry from well before the transaction's TIME (it was stalled between)
// makes the ride take nothing; so does a Redis without PEXPIRETIME.
func TestRideNeedsItsLockToCoverTheSlot(t *testing.T) {
	c := rideCall{rate: 1000, burst: 1, horizon: 20 * ms, lead: 300 * time.Microsecond,
		ttl: 3 * ms, off: 3*ms - ms - 300*time.Microsecond - rideSlack, token: "t"}
	const now = int64(1_795_000_000_000_000) // microseconds
	reply := func(expiry any) []any {
		return []any{
			[]any{strconv.FormatInt(now/1000000, 10), strconv.FormatInt(now%1000000, 10)},
			"OK",
			[]any{"1", "1", nil, nil, nil, nil, nil, "5"},
			expiry,
		}
	}
	// Counted from the millisecond of TIME: the slot (now + 0.3ms) is
	// before the expiry (now + 3ms) less off (1.6ms).
	if _, took, locked, err := c.decide(reply(now/1000 + 3)); err != nil || !took || !locked {
		t.Fatalf("lock counted from TIME's millisecond: took %v, locked %v, %v; want the moment", took, locked, err)
	}
	// Counted from 2ms before TIME: the expiry less off is before the slot.
	if _, took, locked, err := c.decide(reply(now/1000 + 1)); err != nil || took || !locked {
		t.Fatalf("lock counted from 2ms before TIME: took %v, locked %v, %v; want nothing taken, the lock to settle", took, locked, err)
	}
	if _, took, locked, err := c.decide(reply(errors.New("ERR unknown command 'pexpiretime'"))); err != nil || took || !locked {
		t.Fatalf("no PEXPIRETIME: took %v, locked %v, %v; want nothing taken, the lock to settle", took, locked, err)
	}
}
