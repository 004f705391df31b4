package pacer

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Controls are an operator's hold on a schedule: a rate or burst override
// and pause, written to Redis and obeyed by every replica from its next
// call (within one Horizon), and the schedule's state. They need no rate
// of their own: an admin command can use them without a replica's
// configuration. Controls are safe for concurrent use.
type Controls struct {
	rdb  redis.Scripter
	key  string
	name string
	// rate and burst stand in for the configured values in State before
	// any replica has called; zero when unknown.
	rate  float64
	burst int
}

// NewControls returns the controls of the schedule named name on rdb. It
// never closes rdb.
func NewControls(rdb redis.Scripter, name string) (*Controls, error) {
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("%w: pacer.name: %q must be 1-64 letters, digits, '_' or '-'", ErrInvalidConfig, name)
	}
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	}
	return &Controls{rdb: rdb, key: key(name), name: name}, nil
}

// Controls returns the controls of p's schedule; State reports p's own
// configured rate and burst until a replica has called.
func (p *Pacer) Controls() *Controls {
	return &Controls{rdb: p.rdb, key: p.key, name: p.cfg.Name, rate: p.cfg.Rate, burst: p.cfg.Burst}
}

// SetRate overrides the configured rate for every replica sharing the
// schedule, from each one's next Redis call, until ClearOverrides. The
// override stays in Redis (and survives a restart only when Redis persists).
func (p *Controls) SetRate(ctx context.Context, rate float64) error {
	if err := CheckRate(rate); err != nil {
		return fmt.Errorf("pacer: set rate: %w", err)
	}
	return p.hset(ctx, "set rate", "rate_override", strconv.FormatFloat(rate, 'f', -1, 64))
}

// MaxBurst is the largest burst an override may set (SetBurst,
// SetRateBurst), as pacer.burst in a configuration.
const MaxBurst = 1_000_000

// SetBurst overrides the configured burst for every replica, like SetRate.
func (p *Controls) SetBurst(ctx context.Context, burst int) error {
	if err := CheckBurst(burst); err != nil {
		return fmt.Errorf("pacer: set burst: %w", err)
	}
	return p.hset(ctx, "set burst", "burst_override", strconv.Itoa(burst))
}

// SetRateBurst overrides the configured rate and burst for every replica
// in one write, like SetRate and SetBurst: both are checked first, and
// either both overrides are set or neither is.
func (p *Controls) SetRateBurst(ctx context.Context, rate float64, burst int) error {
	if err := CheckRate(rate); err != nil {
		return fmt.Errorf("pacer: set rate and burst: %w", err)
	}
	if err := CheckBurst(burst); err != nil {
		return fmt.Errorf("pacer: set rate and burst: %w", err)
	}
	return p.admin(ctx, "set rate and burst", "set",
		"rate_override", strconv.FormatFloat(rate, 'f', -1, 64), "burst_override", strconv.Itoa(burst))
}

// CheckRate refuses a rate out of MinRate..MaxRate (NaN and the
// infinities too), as SetRate does, so that a caller can check first.
func CheckRate(rate float64) error {
	if !validRate(rate) {
		return fmt.Errorf("%w: rate must be between %g and %d, got %v", ErrInvalidConfig, MinRate, int(MaxRate), rate)
	}
	return nil
}

// CheckBurst refuses a burst override out of 1..MaxBurst, as SetBurst does.
func CheckBurst(burst int) error {
	if burst < 1 || burst > MaxBurst {
		return fmt.Errorf("%w: burst must be between 1 and %d, got %d", ErrInvalidConfig, MaxBurst, burst)
	}
	return nil
}

// ClearOverrides removes the rate and burst overrides: every replica goes
// back to its configured rate and burst.
func (p *Controls) ClearOverrides(ctx context.Context) error {
	return p.admin(ctx, "clear overrides", "clear", "rate_override", "burst_override")
}

// Pause stops the schedule: no replica is granted a slot until Resume.
// Slots granted before the pause (at most one Horizon ahead) still go.
func (p *Controls) Pause(ctx context.Context) error { return p.hset(ctx, "pause", "paused", "1") }

// Resume restarts a paused schedule.
func (p *Controls) Resume(ctx context.Context) error {
	return p.admin(ctx, "resume", "clear", "paused")
}

// Throttle holds the whole schedule back for d, as a provider's Retry-After
// asks: no replica is granted a slot due before now+d (Redis time). A
// shorter throttle never shortens a longer one. Slots granted before the
// call (at most one Horizon ahead) still go.
func (p *Pacer) Throttle(ctx context.Context, d time.Duration) (time.Time, error) {
	if d <= 0 {
		return time.Time{}, fmt.Errorf("pacer: throttle: duration must be positive, got %s", d)
	}
	v, err := throttleScript.Run(ctx, p.rdb, []string{p.key}, d.Microseconds()).Result()
	if err != nil {
		p.holdLocal(d) // in local mode, the local schedule holds back instead
		return time.Time{}, fmt.Errorf("pacer: throttle: %w: %w", ErrUnavailable, err)
	}
	s, ok := v.(string)
	if !ok {
		return time.Time{}, fmt.Errorf("pacer: throttle: %w: got %T", ErrBadReply, v)
	}
	us, err := micros(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("pacer: throttle: %w", err)
	}
	return usTime(us), nil
}

// State is the schedule as stored in Redis, read at Now (Redis time).
type State struct {
	Now             time.Time
	ConfiguredRate  float64 // the rate the replicas are configured with (last writer)
	ConfiguredBurst int     // likewise for burst
	RateOverride    float64 // 0 when none
	BurstOverride   int     // 0 when none
	// EffectiveRate is the rate the schedule runs at: the override when
	// set, else the configured rate, and lower while the provider pushes
	// back (Adaptation).
	EffectiveRate  float64
	EffectiveBurst int
	// Adaptation is the state the provider's answers left (Feedback);
	// zero when no replica ever reported.
	Adaptation     Adaptation
	Paused         bool
	ThrottledUntil time.Time     // zero when never throttled; in the past when over
	Backlog        time.Duration // how far the schedule runs ahead of now (0 when idle)
}

// State reads the schedule's state. Before any replica has asked for a slot
// the configured values are the pacer's own (zero from NewControls).
func (p *Controls) State(ctx context.Context) (State, error) {
	v, err := stateScript.Run(ctx, p.rdb, []string{p.key}).Result()
	if err != nil {
		return State{}, fmt.Errorf("pacer: state: %w: %w", ErrUnavailable, err)
	}
	fields, err := replyStrings(v, 14)
	if err != nil {
		return State{}, fmt.Errorf("pacer: state: %w", err)
	}
	paused, episode := fields[6] == "1", fields[9] == "1"
	fields[6], fields[9] = "", ""
	f, err := parseFields(fields)
	if err != nil {
		return State{}, fmt.Errorf("pacer: state: %w", err)
	}
	s := State{
		Now: usTime(f[0]), ConfiguredRate: f[2], ConfiguredBurst: int(f[3]),
		RateOverride: f[4], BurstOverride: int(f[5]), Paused: paused, ThrottledUntil: usTime(f[7]),
	}
	if s.ConfiguredRate == 0 {
		s.ConfiguredRate, s.ConfiguredBurst = p.rate, p.burst
	}
	s.EffectiveRate, s.EffectiveBurst = s.ConfiguredRate, s.ConfiguredBurst
	if s.RateOverride > 0 {
		s.EffectiveRate = s.RateOverride
	}
	if s.BurstOverride > 0 {
		s.EffectiveBurst = s.BurstOverride
	}
	s.Adaptation = Adaptation{Rate: s.EffectiveRate, Ceiling: s.EffectiveRate, Episode: episode,
		HeldUntil: s.ThrottledUntil, Cuts: int64(f[10]), Holds: int64(f[11]), LastCut: usTime(f[12]), Tolerated: f[13]}
	if episode && f[8] > 0 && f[8] < s.EffectiveRate {
		s.Adaptation.Rate = f[8]
		s.EffectiveRate = f[8]
	}
	if tat := usTime(f[1]); tat.After(s.Now) {
		s.Backlog = tat.Sub(s.Now)
	}
	return s, nil
}

func (p *Controls) hset(ctx context.Context, op, field, value string) error {
	return p.admin(ctx, op, "set", field, value)
}

// admin runs admin.lua with args after the key.
func (p *Controls) admin(ctx context.Context, op string, args ...any) error {
	if err := adminScript.Run(ctx, p.rdb, []string{p.key}, args...).Err(); err != nil {
		return fmt.Errorf("pacer: %s: %w: %w", op, ErrUnavailable, err)
	}
	return nil
}
