package pacer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Reservation is the answer to one Reserve call: Granted slots, the first at
// First and each next one Interval later (or at Stamps, when a grant with a
// stride spread them), all on the Redis clock.
type Reservation struct {
	Granted  int
	First    time.Time     // Redis time of the first granted slot; may be before Now (burst)
	Interval time.Duration // between the schedule's slots: 1/(Rate×(1−Headroom))
	// Stamps, when not nil, are the granted slots' times: a grant that
	// filled gaps of the schedule, or took slots a stride apart, is not
	// one slot every Interval.
	Stamps     []time.Time
	Seq        int64         // the schedule's sequence number after this call (rollback detection)
	Now        time.Time     // Redis time when the slots were granted
	RetryAfter time.Duration // with Granted == 0: when asking again can succeed
	Rate       float64       // the effective cap: the override when one is set, lower while the provider pushes back
	Paused     bool          // the schedule is paused; nothing is granted
	// SlotTenants, with tenant limits, names for each granted slot the
	// tenant it is granted to ("" for none); nil without.
	SlotTenants []string
	// TenantRates, with tenant limits, are the rates of the tenants the
	// call was made for (0: not limited); nil without.
	TenantRates map[string]float64
	// Lapsed counts the slots of the schedule that passed before this
	// call with no call asking for them (beyond the burst an idle
	// schedule lets go at once); each is counted by one call only.
	Lapsed float64
}

// tenant is the tenant slot i is granted to; "" for none.
func (r Reservation) tenant(i int) string {
	if i < len(r.SlotTenants) {
		return r.SlotTenants[i]
	}
	return ""
}

// Slot returns the Redis-clock time of granted slot i (0-based); a slot due
// before the reservation was made is due at Now.
func (r Reservation) Slot(i int) time.Time {
	var t time.Time
	if r.Stamps != nil {
		t = r.Stamps[i]
	} else {
		t = r.First.Add(time.Duration(i) * r.Interval)
	}
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
//
// Each call is also a clock sample: it refines this replica's map from the
// Redis clock to its own. The call asks for no slot closer to now than this
// replica's replies take to arrive, and tells the schedule the latest slot
// this replica holds, so that lost state cannot restart the schedule
// behind it.
func (p *Pacer) Reserve(ctx context.Context, n int) (Reservation, error) {
	return p.reserve(ctx, n, 0, time.Time{})
}

// reserve is Reserve, asking for slots at least stride apart (0: as close
// as the schedule allows) and none before from (Redis clock; zero: none).
func (p *Pacer) reserve(ctx context.Context, n int, stride time.Duration, from time.Time) (Reservation, error) {
	if n < 1 {
		return Reservation{}, fmt.Errorf("pacer: reserve: n must be at least 1, got %d", n)
	}
	p.mu.Lock()
	keys, args := p.reserveArgsLocked(n, stride, from, false)
	epoch := p.stepEpoch
	p.mu.Unlock()
	tkeys, targs, tnames := p.tenantArgs()
	keys, args = append(keys, tkeys...), append(args, targs...)
	p.calls.Add(1)
	sent := p.cfg.Clock.Now()
	v, err := reserveScript.Run(ctx, p.rdb, keys, args...).Result()
	recv := p.cfg.Clock.Now()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Reservation{}, fmt.Errorf("pacer: reserve: %w", ctxErr)
		}
		return Reservation{}, fmt.Errorf("pacer: reserve: %w: %w", ErrUnavailable, err)
	}
	r, err := parseReservation(v, tnames)
	if err != nil {
		return Reservation{}, fmt.Errorf("pacer: reserve: %w", err)
	}
	p.noteTenantRates(r.TenantRates)
	p.mu.Lock()
	p.seq = max(p.seq, r.Seq)
	p.lapsed += r.Lapsed
	p.sampleLocked(sent, recv, r.Now)
	p.forfeitStepLocked(&r, epoch)
	p.deg.noteReplyLocked(r, recv, p.clock, p.cfg.Horizon)
	p.mu.Unlock()
	p.granted.Add(int64(r.Granted))
	return r, nil
}

// stepSeqJump is how far past the last sequence number it saw a replica
// that saw Redis's clock step sets the one it sends (reserve.lua's seq
// argument): a number the schedule has not reached, which restarts it one
// horizon after now, as after a rollback.
const stepSeqJump = 1 << 20

// sampleLocked adds a round trip to the clock map (sent and answered at
// local times sent and recv, run at Redis time at) and, when it shows that
// Redis's clock stepped, notes the step (noteStepLocked). p.mu must be held.
func (p *Pacer) sampleLocked(sent, recv, at time.Time) {
	if p.clock.add(sent, recv, at) {
		p.noteStepLocked()
	}
}

// noteStepLocked handles a step of Redis's clock.
// The schedule is kept on Redis's clock, and the slots every replica holds
// were placed on the clock before the step: slots granted after it, on the
// new clock, would fall among them (by up to the step, or the horizon).
// So the slots of every reply to a call made before it are given up as
// stale (forfeitStepLocked), and the calls after it carry a sequence number
// the schedule has not reached, which restarts it one horizon after now,
// past every slot held. A backward step is handled so too; the schedule
// also shifts for it by itself (reserve.lua). p.mu must be held.
func (p *Pacer) noteStepLocked() {
	p.stepEpoch++
	p.seq += stepSeqJump
	p.log().Warn("pacer: Redis's clock stepped; the slots granted across the step are given up and the schedule restarts one horizon on",
		"horizon", p.cfg.Horizon)
}

// forfeitStepLocked reports whether the slots of r, the reply to a call
// whose arguments were made at step epoch epoch (p.stepEpoch), must be
// given up because this replica saw Redis's clock step since
// (noteStepLocked), and gives them up: r then grants nothing and says to
// ask again after one interval. p.mu must be held.
func (p *Pacer) forfeitStepLocked(r *Reservation, epoch int64) bool {
	if r.Granted == 0 || epoch == p.stepEpoch {
		return false
	}
	p.stale.Add(int64(r.Granted))
	r.Granted, r.Stamps, r.SlotTenants = 0, nil, nil
	r.RetryAfter = max(r.Interval, time.Microsecond)
	return true
}

// reserveArgsLocked returns reserve.lua's keys and arguments for a call
// asking for n slots at least stride apart, none before from (Redis clock;
// zero: none), as a ride or not, before the tenants' (tenantArgs). p.mu
// must be held.
func (p *Pacer) reserveArgsLocked(n int, stride time.Duration, from time.Time, ride bool) (keys []string, args []any) {
	lead := p.clock.lead()
	if ride || p.fastLocked() {
		lead = p.clock.typicalLead() // see Ride, and fastLocked
	}
	lead = max(0, lead-p.cfg.MaxLateness/2)
	var hint, fromUs int64
	if !p.hint.IsZero() {
		hint = p.hint.UnixMicro()
	}
	if !from.IsZero() {
		fromUs = from.UnixMicro()
	}
	rideArg := "0"
	if ride {
		rideArg = "1"
	}
	keys = []string{p.key, p.gapsKey}
	args = []any{p.cfg.Rate, p.cfg.Burst, n, p.cfg.Horizon.Microseconds(), pausePoll.Microseconds(),
		max(p.cfg.Headroom, 0), lead.Microseconds(), hint, adaptiveArg(p.cfg.Adaptive.Enabled),
		stride.Microseconds(), p.seq, fromUs, rideArg}
	return keys, args
}

// fastLocked reports whether the schedule is so fast that half the
// lateness bound spans fastPoints (64) points or more (64,000 slots/s at
// the default 2ms): a rate far above what the replicas use, as with no
// cap. Every call then asks by the typical lead, as a ride does, where
// others ask by the longest. Placed by the longest, every batch of slots
// came that much after the replica could have used it, and at the
// uncapped ceiling the replica waited for each; by the typical lead, one
// reply in a few brings its batch stale, which costs the claim waiting on
// it one more call and the schedule points nobody would have used. Below
// that rate a stale batch would cost slots of a cap that binds, and the
// longest lead is kept. p.mu must be held.
func (p *Pacer) fastLocked() bool {
	iv := p.batch.interval
	return iv > 0 && fastPoints*iv <= p.cfg.MaxLateness/2
}

// fastPoints is how many points of the schedule make a span of it cheap:
// half the lateness bound spanning as many makes a schedule very fast
// (fastLocked), and reserve.lua's skip_min is the same number for the
// moments a caller's lead passes.
const fastPoints = 64

// adaptiveArg tells reserve.lua whether the effective rate applies.
func adaptiveArg(on bool) string {
	if on {
		return "1"
	}
	return "0"
}

// parseReservation reads reserve.lua's reply; tenants are the tenants the
// call was made for, in order (nil for none).
func parseReservation(v any, tenants []string) (Reservation, error) {
	fields, err := replyStrings(v, 12)
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
	r := Reservation{
		Granted:    int(f[0]),
		First:      usTime(f[1]),
		Interval:   usDur(f[2]),
		Now:        usTime(f[3]),
		RetryAfter: usDur(f[4]),
		Rate:       f[5],
		Paused:     fields[6] == "paused",
	}
	if len(tenants) > 0 {
		if r.TenantRates, r.SlotTenants, err = parseTenants(fields[7], fields[8], tenants, r.Granted); err != nil {
			return Reservation{}, err
		}
	}
	if fields[9] != "" {
		if r.Stamps, err = parseStamps(fields[9], r.Granted); err != nil {
			return Reservation{}, err
		}
	}
	if r.Seq, err = strconv.ParseInt(fields[10], 10, 64); err != nil {
		return Reservation{}, fmt.Errorf("%w: seq %q", ErrBadReply, fields[10])
	}
	if fields[11] != "" {
		if r.Lapsed, err = strconv.ParseFloat(fields[11], 64); err != nil || r.Lapsed < 0 {
			return Reservation{}, fmt.Errorf("%w: lapsed %q", ErrBadReply, fields[11])
		}
	}
	return r, nil
}

// parseStamps reads the granted slots' times, comma-separated.
func parseStamps(s string, granted int) ([]time.Time, error) {
	out := make([]time.Time, 0, granted)
	for s != "" {
		var one string
		one, s, _ = strings.Cut(s, ",")
		us, err := micros(one)
		if err != nil {
			return nil, err
		}
		out = append(out, usTime(us))
	}
	if len(out) != granted {
		return nil, fmt.Errorf("%w: %d slot times for %d slots", ErrBadReply, len(out), granted)
	}
	return out, nil
}

// Stats are this replica's counters since New, and its view of the Redis
// clock.
type Stats struct {
	Calls    int64         // Redis calls made to reserve slots
	Granted  int64         // slots granted to this replica
	Used     int64         // slots spent by waiters
	Expired  int64         // granted slots dropped unclaimed (Forfeited["unclaimed"])
	WaitTime time.Duration // total time waiters spent in Take
	// Forfeited counts slots given up, by reason: "unclaimed" (no waiter
	// took it before its deadline), "stale" (the reply that granted it
	// came after its deadline), "late" (the waiter, or the caller through
	// Forfeit, could not send before its deadline), "ineligible" (the
	// caller held only jobs of tenants over their limits: Unused), "idle"
	// (granted to a ride whose blocking read brought no job: Ride).
	Forfeited map[string]int64
	// Rides counts rides that were granted a slot (Ride).
	Rides int64
	// Lapsed counts the slots of the schedule that passed with no replica
	// asking for them, as this replica's calls found them (each lapsed
	// slot is found by one call of one replica: sum them over replicas).
	// While jobs wait, they are moments when no replica asked in time.
	Lapsed float64
	// ClockOffset is the Redis clock minus this replica's clock, as
	// estimated from the fastest recent round trips.
	ClockOffset time.Duration
	// ClockUncertainty bounds the error of ClockOffset: half the round
	// trip of the sample it came from, plus drift since.
	ClockUncertainty time.Duration
	DegradedStats    // local mode while Redis is away (pacer.when_unavailable: local)
}

// Forfeit reasons, the keys of Stats.Forfeited.
const (
	ForfeitUnclaimed = "unclaimed"
	ForfeitStale     = "stale"
	ForfeitLate      = "late"
	// ForfeitIneligible counts slots that came when every job held was of
	// a tenant over its limit (Unused).
	ForfeitIneligible = "ineligible"
	// ForfeitIdle counts slots granted to a ride whose blocking read
	// brought no job (Ride): taken only while the schedule was idle.
	ForfeitIdle = "idle"
)

// Stats returns this replica's counters.
func (p *Pacer) Stats() Stats {
	p.mu.Lock()
	off, unc := p.clock.offset(p.cfg.Clock.Now())
	deg := p.degradedStatsLocked()
	lapsed := p.lapsed
	p.mu.Unlock()
	return Stats{
		Calls: p.calls.Load(), Granted: p.granted.Load(), Used: p.used.Load(),
		Expired: p.unclaimed.Load(), WaitTime: time.Duration(p.waitNanos.Load()),
		Forfeited: map[string]int64{
			ForfeitUnclaimed: p.unclaimed.Load(), ForfeitStale: p.stale.Load(), ForfeitLate: p.late.Load(),
			ForfeitIneligible: p.ineligible.Load(), ForfeitIdle: p.idle.Load(),
		},
		Rides: p.rides.Load(), Lapsed: lapsed,
		ClockOffset: off, ClockUncertainty: unc, DegradedStats: deg,
	}
}
