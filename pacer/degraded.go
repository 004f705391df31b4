package pacer

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Degraded mode: what a Pacer does while its Redis cannot be reached.
//
// With WhenUnavailable Stop (the default) it grants nothing: Take returns
// an error wrapping ErrUnavailable until Redis answers. With Local, a
// replica whose Reserve fails paces itself, for at most MaxDegraded, at
//
//	local = Rate × (1 − Headroom) × DegradedSafety ÷ N
//
// where Rate is the effective cap the last successful reply reported
// (Reservation.Rate) and N the replicas sharing the schedule as Members
// last told this Pacer. The cluster then sends at most
// Rate × (1 − Headroom) × DegradedSafety in all, as long as N is right.
//
// # Why the cap holds in every 1s window
//
// Write R for the last effective rate, r = R × (1 − Headroom) for the
// shared schedule's, s for DegradedSafety, L for MaxLateness (a request
// leaves at most L after its slot). An evenly spaced schedule of rate q puts
// at most floor(q × W) + 1 slots in a closed window of length W.
//
//   - Entering. Every shared slot was granted at most one Horizon ahead of
//     a call that ended before this replica's call failed (Redis went away
//     for everyone), so none lies later than the failure + Horizon. The
//     local schedule starts after that, after the latest slot this replica
//     holds (its hint) and after any throttle the last reply reported, and
//     its first slot is one local interval in: each replica's local slots
//     in a window's tail of length T number at most local × T, not
//     local × T + 1. A 1s window across the entry holds at most
//     r × a + 1 (the shared part, length a) + r × s × (1 − a) ≤ r + 1
//     (+ r × L for lateness) for any s ≤ 1.
//   - Inside. N unaligned local schedules put at most
//     N × (floor(local × (1s + L)) + 1) ≤ r × s × (1 + L) + N requests in a
//     1s window. localRate also caps each replica at
//     (R + 1 − N) ÷ (N × (1 + L)), so that the sum stays ≤ R + 1 however
//     few slots a second N replicas share.
//   - Leaving. The first replica to hear Redis again holds the schedule
//     for resumeHold (resume.lua) before anyone draws on it: the others
//     hear Redis within probeEvery + 2 × probeTimeout, and hold local slots
//     at most a Horizon ahead, so the last local slot falls at least
//     N shared intervals (and L) before the first shared one. That gap
//     takes N slots from the window across the return, which pays for the
//     N local schedules' "+1": at most r × s × b + N + r × (1 − b − N/r) + 1
//     ≤ r + 1 (+ r × L).
//
// So the transitions need only s ≤ 1; s is for the steady part and the
// guess of N. With the defaults (Headroom 0.02, L 2ms) and s = 0.75, a
// 1s window in degraded mode holds at most 0.98 × 0.75 × 1.002 × R + N ≈
// 0.74 × R + N ≤ R + 1 whenever N ≤ 0.26 × R + 1 (78 replicas at 300/s;
// beyond that localRate's cap takes over); and one replica more than the
// pacer knew of (one started while Redis was away) still keeps the total
// at 0.98 × 0.75 × (N + 1) ÷ N × R ≤ R for N ≥ 3. 0.9 would keep the
// first property but lose the second.
//
// # What it does not cover
//
// A replica that alone loses Redis while the others keep it adds its
// local share on top of the full schedule the others go on drawing:
// up to R × (1 − Headroom) × (1 + s ÷ N) until it hears Redis again or
// MaxDegraded passes, whichever comes first. A replica that has never had
// a reply from Redis, whose last reply said paused, or that has not heard
// from Redis for MaxDegraded does not enter degraded mode: it knows
// neither the rate nor the others, or no longer.

// UnavailableMode says what a Pacer does while its Redis cannot be reached.
type UnavailableMode string

// The modes of WhenUnavailable.
const (
	// Stop grants nothing: Take fails with ErrUnavailable (fail closed).
	Stop UnavailableMode = "stop"
	// Local paces this replica alone at its share of the last rate, for
	// at most MaxDegraded.
	Local UnavailableMode = "local"
)

// DegradedConfig is the part of Config about Redis being unreachable. Its
// keys are the pacer's own (pacer.when_unavailable, ...).
type DegradedConfig struct {
	// WhenUnavailable is stop or local. Zero means stop.
	WhenUnavailable UnavailableMode `yaml:"when_unavailable"`
	// DegradedSafety is the share of this replica's part of the last rate
	// that it sends at in local mode, in (0, 1]. Zero means 0.75.
	DegradedSafety float64 `yaml:"degraded_safety"`
	// MaxDegraded bounds one spell of local mode, counted from the last
	// time this replica heard from Redis (a Reserve's reply, or Announce
	// through Members); then nothing is granted until Redis answers, as
	// with stop. Zero means 1m.
	MaxDegraded time.Duration `yaml:"max_degraded"`
	// Log receives a line when local mode begins, stops granting and ends.
	// Zero means slog.Default().
	Log *slog.Logger `yaml:"-"`
}

// Defaults of DegradedConfig.
const (
	DefaultDegradedSafety = 0.75
	DefaultMaxDegraded    = time.Minute
)

const (
	// probeEvery is how often a degraded replica asks whether Redis
	// answers again, and probeTimeout how long each of its two calls
	// (State, then resume.lua) may take.
	probeEvery   = 200 * time.Millisecond
	probeTimeout = 250 * time.Millisecond
)

var (
	//go:embed resume.lua
	resumeSrc    string
	resumeScript = redis.NewScript(resumeSrc)
)

func (c *DegradedConfig) setDefaults() {
	if c.WhenUnavailable == "" {
		c.WhenUnavailable = Stop
	}
	if c.DegradedSafety == 0 {
		c.DegradedSafety = DefaultDegradedSafety
	}
	if c.MaxDegraded == 0 {
		c.MaxDegraded = DefaultMaxDegraded
	}
}

// validate adds the problems of c with bad.
func (c *DegradedConfig) validate(bad func(key, format string, args ...any)) {
	if c.WhenUnavailable != Stop && c.WhenUnavailable != Local {
		bad("when_unavailable", "must be stop or local, got %q", c.WhenUnavailable)
	}
	if !(c.DegradedSafety > 0) || c.DegradedSafety > 1 {
		bad("degraded_safety", "must be more than 0 and at most 1, got %v", c.DegradedSafety)
	}
	if c.MaxDegraded < 0 || c.MaxDegraded > time.Hour {
		bad("max_degraded", "must be more than 0 and at most 1h, got %s", c.MaxDegraded)
	}
}

// degraded is a Pacer's view of Redis being away; the Pacer's mu guards it.
type degraded struct {
	// What the last successful Reserve said.
	known     bool      // a Reserve has succeeded
	rate      float64   // its effective cap
	paused    bool      // the schedule was paused
	notBefore time.Time // local time before which it granted nothing (a throttle)
	heard     time.Time // when Redis last answered a Reserve or an Announce (local clock)

	on       bool          // pacing locally
	stopped  bool          // MaxDegraded passed: granting nothing
	since    time.Time     // when local mode began (local clock)
	next     time.Time     // the next local slot (local clock)
	interval time.Duration // between local slots
	local    float64       // the local rate, slots/s
	sharers  int           // N when local mode began
	probing  bool          // a probe is under way
	probed   time.Time     // when the last probe began

	episodes, granted int64
}

// noteReplyLocked records a successful Reserve's reply, received at recv.
func (d *degraded) noteReplyLocked(r Reservation, recv time.Time, c *clockMap, horizon time.Duration) {
	d.known, d.rate, d.paused = true, r.Rate, r.Paused
	d.heard = later(d.heard, recv)
	if r.Granted == 0 && !r.Paused { // throttled, or full: no slot of the schedule before this
		d.notBefore = c.local(r.Now.Add(r.RetryAfter + horizon))
	}
}

// localRate is one replica's rate in local mode: its share of the
// schedule's rate (rate × (1 − headroom) ÷ sharers) times safety, and no
// more than keeps the sharers' unaligned schedules, each request up to
// maxLate after its slot, within rate + 1 in every 1s window.
func localRate(rate, headroom, safety float64, sharers int, maxLate time.Duration) float64 {
	n := float64(max(1, sharers))
	share := rate * (1 - max(headroom, 0)) * safety / n
	ceiling := (rate + 1 - n) / (n * (1 + maxLate.Seconds()))
	return max(0, min(share, ceiling))
}

// resumeHold is how long the first replica to hear Redis again holds the
// schedule: until every other replica has heard it too and its local
// slots (at most a horizon ahead) are past, plus a gap of sharers shared
// intervals and the lateness bound (see the package's degraded-mode notes).
func (p *Pacer) resumeHold(sharers int, rate float64) time.Duration {
	gap := p.cfg.MaxLateness
	if r := rate * (1 - max(p.cfg.Headroom, 0)); r > 0 {
		gap += time.Duration(float64(max(1, sharers)) / r * float64(time.Second))
	}
	return probeEvery + 2*probeTimeout + p.cfg.Horizon + gap
}

// obtain is refill while Redis answers, and the local schedule while it
// does not (with WhenUnavailable Local). Like refill it adds slots to the
// buffer, or waits until asking again can succeed.
func (p *Pacer) obtain(ctx context.Context, want int, stride time.Duration) error {
	if local, err := p.refillLocal(ctx, want); local {
		return err
	}
	err := p.refill(ctx, want, stride)
	if err != nil && p.enterDegraded(err) {
		return nil
	}
	return err
}

// enterDegraded begins local mode after err, when the configuration asks
// for it and the last reply makes it possible; false leaves err to fail.
func (p *Pacer) enterDegraded(err error) bool {
	if p.cfg.WhenUnavailable != Local || !errors.Is(err, ErrUnavailable) {
		return false
	}
	p.mu.Lock()
	d := &p.deg
	n := p.sharersNow()
	rate := localRate(d.rate, p.cfg.Headroom, p.cfg.DegradedSafety, n, p.cfg.MaxLateness)
	now := p.cfg.Clock.Now()
	if d.on || !d.known || d.paused || rate <= 0 || !now.Before(d.heard.Add(p.cfg.MaxDegraded)) {
		on := d.on
		p.mu.Unlock()
		return on
	}
	start := now.Add(p.cfg.Horizon) // past every slot of the schedule
	if !p.hint.IsZero() {
		start = later(start, p.clock.local(p.hint))
	}
	start = later(start, d.notBefore)
	d.on, d.stopped, d.since, d.sharers, d.local = true, false, now, n, rate
	d.interval = time.Duration(float64(time.Second) / rate)
	d.next = start.Add(d.interval)
	d.probed = now
	d.episodes++
	last, left := d.rate, d.heard.Add(p.cfg.MaxDegraded).Sub(now)
	p.mu.Unlock()
	p.log().Warn("pacer: Redis unreachable; pacing this replica locally",
		"local_rate", rate, "last_rate", last, "replicas", n, "for_at_most", left.Round(time.Millisecond), "reason", err)
	return true
}

// refillLocal adds local slots to the buffer while in local mode, up to
// want and at most a horizon ahead, and starts a probe when one is due;
// local is false when the pacer is not in local mode.
func (p *Pacer) refillLocal(ctx context.Context, want int) (local bool, err error) {
	p.mu.Lock()
	d := &p.deg
	if !d.on {
		p.mu.Unlock()
		return false, nil
	}
	now := p.cfg.Clock.Now()
	p.probeLocked(now)
	end := d.heard.Add(p.cfg.MaxDegraded)
	if !now.Before(end) {
		first := !d.stopped
		d.stopped = true
		p.mu.Unlock()
		if first {
			p.log().Warn("pacer: Redis still unreachable after pacer.max_degraded; granting nothing until it answers",
				"max_degraded", p.cfg.MaxDegraded)
		}
		return true, fmt.Errorf("pacer: wait: %w: local mode ended after %s (pacer.max_degraded)", ErrUnavailable, p.cfg.MaxDegraded)
	}
	limit := earlier(now.Add(p.cfg.Horizon), end)
	d.next = later(d.next, now)
	n := 0
	for ; n < want && !d.next.After(limit); n++ {
		st := p.clock.redis(d.next)
		p.buf = append(p.buf, slot{local: d.next, deadline: d.next.Add(p.cfg.MaxLateness), stamp: st})
		if st.After(p.hint) {
			p.hint = st
		}
		d.next = d.next.Add(d.interval)
	}
	d.granted += int64(n)
	wait := earlier(d.next.Add(-p.cfg.Horizon), end).Sub(now)
	p.mu.Unlock()
	if n > 0 {
		return true, nil
	}
	if err := p.sleepFor(ctx, max(wait, time.Millisecond)); err != nil {
		return true, fmt.Errorf("pacer: wait: %w", err)
	}
	return true, nil
}

// probeLocked starts a probe in the background when one is due.
func (p *Pacer) probeLocked(now time.Time) {
	d := &p.deg
	if d.probing || now.Sub(d.probed) < probeEvery {
		return
	}
	d.probing, d.probed = true, now
	hold := p.resumeHold(d.sharers, d.rate)
	go p.probe(hold)
}

// probe asks Redis whether it answers (State, read only) and, when it
// does, holds the schedule for hold (resume.lua) and leaves local mode:
// the next claim reserves from Redis, passing the latest local slot as its
// hint. Each call may take probeTimeout.
func (p *Pacer) probe(hold time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	_, err := p.Controls().State(ctx)
	cancel()
	var at, until time.Time
	var sent, recv time.Time
	if err == nil {
		ctx, cancel = context.WithTimeout(context.Background(), probeTimeout)
		sent = p.cfg.Clock.Now()
		at, until, err = p.resume(ctx, hold)
		recv = p.cfg.Clock.Now()
		cancel()
	}
	p.mu.Lock()
	d := &p.deg
	d.probing = false
	if err != nil || !d.on {
		p.mu.Unlock()
		return
	}
	p.sampleLocked(sent, recv, at)
	d.on = false
	since, granted := d.since, d.granted
	p.mu.Unlock()
	p.log().Info("pacer: Redis answers again; back on the shared schedule",
		"degraded_for", p.cfg.Clock.Now().Sub(since).Round(time.Millisecond), "schedule_held_until", until,
		"local_slots_granted_total", granted)
}

// resume runs resume.lua: it holds the schedule for d and returns the
// Redis time it ran at and the time the schedule is held until.
func (p *Pacer) resume(ctx context.Context, d time.Duration) (at, until time.Time, err error) {
	v, err := resumeScript.Run(ctx, p.rdb, []string{p.key}, d.Microseconds()).Result()
	if err != nil {
		return at, until, fmt.Errorf("pacer: resume: %w: %w", ErrUnavailable, err)
	}
	fields, err := replyStrings(v, 2)
	if err != nil {
		return at, until, fmt.Errorf("pacer: resume: %w", err)
	}
	f, err := parseFields(fields)
	if err != nil {
		return at, until, fmt.Errorf("pacer: resume: %w", err)
	}
	return usTime(f[0]), usTime(f[1]), nil
}

// noteHeard records that Redis answered an Announce.
func (p *Pacer) noteHeard() {
	p.mu.Lock()
	p.deg.heard = later(p.deg.heard, p.cfg.Clock.Now())
	p.mu.Unlock()
}

// holdLocal holds the local schedule back for d, as Throttle does the
// shared one, when the pacer is in local mode (the provider throttled
// while Redis was away).
func (p *Pacer) holdLocal(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deg.on {
		p.deg.next = later(p.deg.next, p.cfg.Clock.Now().Add(d))
	}
}

// DegradedStats are a Pacer's figures of local mode (WhenUnavailable
// Local), part of Stats.
type DegradedStats struct {
	// Degraded reports whether the pacer is in local mode: its Redis did
	// not answer and it paces this replica alone, at LocalRate.
	Degraded bool
	// DegradedStopped reports whether local mode has lasted MaxDegraded:
	// nothing is granted until Redis answers.
	DegradedStopped bool
	// DegradedSince is when local mode began (this replica's clock); zero
	// when not degraded.
	DegradedSince time.Time
	// LocalRate is the rate of the local schedule, slots per second; zero
	// when not degraded.
	LocalRate float64
	// DegradedEpisodes counts the times local mode began.
	DegradedEpisodes int64
	// LocalGranted counts the slots the local schedule granted.
	LocalGranted int64
	// Sharers is how many replicas share the schedule, as Members last
	// told this pacer (1 until then): the divisor of the local rate.
	Sharers int
}

// degradedStatsLocked returns the pacer's DegradedStats.
func (p *Pacer) degradedStatsLocked() DegradedStats {
	d := &p.deg
	s := DegradedStats{Degraded: d.on, DegradedStopped: d.on && d.stopped,
		DegradedEpisodes: d.episodes, LocalGranted: d.granted, Sharers: p.sharersNow()}
	if d.on {
		s.DegradedSince, s.LocalRate = d.since, d.local
	}
	return s
}

// redis maps a time on this replica's clock to the Redis clock, the
// inverse of local. Before any sample it returns t unchanged.
func (c *clockMap) redis(t time.Time) time.Time {
	if c.best < 0 {
		return t
	}
	b := c.samples[c.best]
	return b.redis.Add(t.Sub(b.mid))
}

func (p *Pacer) log() *slog.Logger {
	if p.cfg.Log != nil {
		return p.cfg.Log
	}
	return slog.Default()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
