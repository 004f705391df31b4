package pacer

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// rideFields are the fields of the schedule's hash a ride reads: those of
// reserve.lua's HMGET that decide whether the schedule is idle.
var rideFields = []any{"tat", "last_now", "rate_override", "burst_override", "paused", "eff_rate", "a_episode", "seq"}

// rideCall is one ride's question to Redis and what it needs to read the
// answer: the commands go in one MULTI behind a blocking read (send), and
// decide takes the idle moment by reserve.lua's rules, or not.
type rideCall struct {
	rate     float64       // configured rate; the hash's override and effective rate apply
	burst    int           // configured burst; the hash's override applies
	headroom float64       // the schedule runs at rate × (1 − headroom)
	horizon  time.Duration // no slot further ahead of Redis's now
	adaptive bool          // the provider's answers steer the rate (eff_rate applies)
	lead     time.Duration // the slot is placed this long after Redis's now
	hint     time.Time     // the latest slot this replica holds (zero: none)
	seq      int64         // the highest seq this replica has seen
	// ttl is the ride lock's time to live, whole milliseconds: at least
	// lead + one interval + rideSlack + 1ms, so that the lock outlives the
	// slot by an interval whatever the millisecond its expiry is counted
	// from.
	ttl time.Duration
	// off is what the lock's expiry less makes a time after the slot:
	// ttl − 1ms − lead − rideSlack (the lock's value carries it for
	// reserve.lua).
	off time.Duration
	// token names the ride in its lock, for its settle.
	token string
}

// rideCallLocked returns the ride call for this replica's state now. p.mu
// must be held.
func (p *Pacer) rideCallLocked() rideCall {
	lead := max(0, p.clock.typicalLead()-p.cfg.MaxLateness/2)
	ttl := (lead+p.batch.interval+rideSlack+time.Millisecond-1)/time.Millisecond*time.Millisecond + time.Millisecond
	return rideCall{
		rate: p.cfg.Rate, burst: p.cfg.Burst, headroom: max(p.cfg.Headroom, 0), horizon: p.cfg.Horizon,
		adaptive: p.cfg.Adaptive.Enabled, lead: lead, hint: p.hint, seq: p.seq,
		ttl: ttl, off: ttl - time.Millisecond - lead - rideSlack,
		token: p.rideToken(),
	}
}

// rideSlack is how much longer than its bound a ride lock lives: the
// lock's expiry may be counted from a moment of the MULTI a little before
// its TIME (a Redis that takes one time for a whole transaction), and the
// slot is placed from TIME.
const rideSlack = 100 * time.Microsecond

// send queues the ride's MULTI in pipe: TIME first (the slot is placed
// from it), the lock (SET NX with ttl, its value "r:", off in
// microseconds, ":" and the token), the schedule's hash, and the lock's
// expiry as Redis counted it (PEXPIRETIME, Redis 7.0 and later: a Redis
// may count it from the transaction's start, before its TIME). It returns
// the EXEC's command.
func (c rideCall) send(ctx context.Context, pipe redis.Pipeliner, key, lockKey string) *redis.Cmd {
	pipe.Do(ctx, "multi")
	pipe.Do(ctx, "time")
	pipe.Do(ctx, "set", lockKey, "r:"+strconv.FormatInt(c.off.Microseconds(), 10)+":"+c.token, "nx", "px", c.ttl.Milliseconds())
	pipe.Do(ctx, append([]any{"hmget", key}, rideFields...)...)
	pipe.Do(ctx, "pexpiretime", lockKey)
	return pipe.Do(ctx, "exec")
}

// decide reads the EXEC's reply and takes the idle moment when reserve.lua
// would grant a ride: the lock was free (no other ride's slot is within
// an interval), the schedule's state is there and not paused, no caller
// has seen a later state (a rollback), and tat, with the burst's floor,
// the clock's going back and this replica's hint applied as reserve.lua
// applies them, is not after now. The slot is at now + lead. It returns
// whether the ride took a slot and whether its lock was set (the ride is
// then to be settled, slot or not); the reservation's Now and Seq are set
// either way, and its First, when the schedule was held, to tat.
func (c rideCall) decide(v any) (res Reservation, took, locked bool, err error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 4 {
		return Reservation{}, false, false, fmt.Errorf("%w: ride: want 4 replies, got %T %v", ErrBadReply, v, v)
	}
	nowUs, err := timeReply(arr[0])
	if err != nil {
		return Reservation{}, false, false, err
	}
	h, ok := arr[2].([]any)
	if !ok || len(h) != len(rideFields) {
		return Reservation{}, false, false, fmt.Errorf("%w: ride: hash fields %T %v", ErrBadReply, arr[2], arr[2])
	}
	field := func(i int) (float64, bool) {
		s, ok := h[i].(string)
		if !ok {
			return 0, false
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil
	}
	res = Reservation{Now: usTime(nowUs)}
	if seq, ok := field(7); ok {
		res.Seq = int64(seq)
	}
	locked = arr[1] != nil
	tat, known := field(0)
	if !locked || !known || h[4] == "1" {
		return res, false, locked, nil
	}
	rate := c.rate
	if ro, ok := field(2); ok && ro > 0 {
		rate = ro
	}
	if eff, ok := field(5); ok && c.adaptive && h[6] == "1" && eff > 0 && eff < rate {
		rate = eff
	}
	burst := float64(c.burst)
	if bo, ok := field(3); ok && bo >= 1 {
		burst = bo
	}
	interval := 1000000 / (rate * (1 - c.headroom))
	res.Interval, res.Rate = usDur(interval), rate
	now := nowUs
	last, hasLast := field(1)
	if hasLast && now < last {
		tat -= last - now // the Redis clock went back
	}
	tat = max(tat, now-(burst-1)*interval)
	horizon := float64(c.horizon.Microseconds())
	if c.seq > res.Seq {
		return res, false, true, nil // rolled back: reserve.lua restarts one horizon ahead
	}
	if !c.hint.IsZero() {
		hint := float64(c.hint.UnixMicro())
		if hint <= now+horizon {
			if hasLast && hint > last+horizon {
				return res, false, true, nil // rolled back
			}
			tat = max(tat, hint+interval)
		}
	}
	if tat > now {
		res.First = usTime(tat) // held until then
		return res, false, true, nil
	}
	first := now + float64(c.lead.Microseconds())
	expiry, ok := arr[3].(int64) // milliseconds; an error before Redis 7.0
	if first > now+horizon || float64(c.off.Microseconds()) < interval ||
		!ok || first > float64(expiry*1000-c.off.Microseconds()) {
		// The lock too short for the schedule's interval (an operator
		// slowed it since this replica last heard) or for the slot
		// (Redis counted its expiry from well before TIME), or its expiry
		// unknown: take nothing.
		return res, false, true, nil
	}
	res.Granted, res.First = 1, usTime(first)
	return res, true, true, nil
}

// timeReply reads TIME's reply as microseconds since the epoch.
func timeReply(v any) (float64, error) {
	t, ok := v.([]any)
	if !ok || len(t) != 2 {
		return 0, fmt.Errorf("%w: ride: TIME %T %v", ErrBadReply, v, v)
	}
	var parts [2]int64
	for i, x := range t {
		s, ok := x.(string)
		if !ok {
			return 0, fmt.Errorf("%w: ride: TIME %T %v", ErrBadReply, x, x)
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: ride: TIME %q", ErrBadReply, s)
		}
		parts[i] = n
	}
	return float64(parts[0]*1000000 + parts[1]), nil
}

// settleTimeout bounds a ride's settle call.
const settleTimeout = time.Second

// rideToken returns a token naming one ride in its lock: this replica's
// random id and a count.
func (p *Pacer) rideToken() string {
	return strconv.FormatUint(p.rideID, 36) + "." + strconv.FormatInt(p.rideN.Add(1), 36)
}

// settleRide writes a ride whose lock was set into the schedule with a
// call of reserve.lua (its token, and its slot when it took one), off the
// job's path: tat moves an interval past the slot, seq counts it, and the
// lock goes, so that the next ride may come as soon as the schedule is
// free. It is a clock sample like any call. A settle that fails leaves the
// lock to lapse; until then every other call moves tat past the latest
// moment the ride's slot can be. A settled slot raises the hint.
func (p *Pacer) settleRide(token string, slot time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	p.mu.Lock()
	keys, args := p.reserveArgsLocked(1, 0, time.Time{})
	p.mu.Unlock()
	args[12] = token
	if !slot.IsZero() {
		args[13] = fmt.Sprintf("%d.%03d", slot.UnixMicro(), slot.Nanosecond()%1000)
	}
	p.calls.Add(1)
	sent := p.cfg.Clock.Now()
	v, err := reserveScript.Run(ctx, p.rdb, keys, args...).Result()
	recv := p.cfg.Clock.Now()
	if err != nil {
		if l := p.cfg.Log; l != nil {
			l.Debug("pacer: ride: settle", "err", err)
		}
		return
	}
	r, err := parseReservation(v, nil)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq = max(p.seq, r.Seq)
	p.lapsed += r.Lapsed
	p.clock.add(sent, recv, r.Now)
	p.deg.noteReplyLocked(r, recv, p.clock, p.cfg.Horizon)
	p.batch.noteInterval(r.Interval)
	if !slot.IsZero() {
		p.raiseHintLocked(slot)
	}
}
