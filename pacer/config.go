package pacer

import (
	"errors"
	"regexp"
	"time"

	"github.com/sluicehq/sluice/setting"
)

// Config configures a Pacer. Zero values mean the documented default.
type Config struct {
	// Name names the schedule: one per provider account, shared by every
	// replica that sends to it. Required: letters, digits, '_' and '-'.
	Name string `yaml:"name"`
	// Rate is the cap for the whole cluster, in slots per second. Required, > 0.
	// An operator's override in Redis (SetRate) takes precedence.
	Rate float64 `yaml:"rate"`
	// Burst is how many slots may go at once after the schedule was idle.
	// Zero means 1: perfectly even spacing.
	Burst int `yaml:"burst"`
	// Horizon bounds how far ahead of now a slot may be granted, so that no
	// replica hoards slots and a rate change or throttle reaches every
	// replica within one horizon. Zero means 50ms.
	Horizon time.Duration `yaml:"horizon"`
	// MaxBatch is the most slots one Redis call may grant. Zero means 256.
	// It only binds above 256 slots per horizon (5,120/s with the default
	// horizon): below that, a call grants at most one horizon of the rate.
	MaxBatch int `yaml:"max_batch"`
	// MaxLateness is how late after its slot a request may still leave. A
	// slot whose request cannot leave by then (nobody claimed it in time,
	// the reply that granted it came too late, or the sender stalled) is
	// forfeited, never spent late. Zero means 2ms.
	MaxLateness time.Duration `yaml:"max_lateness"`
	// Headroom is the fraction of Rate the schedule leaves unused, so that
	// requests up to MaxLateness late still never put more than
	// Rate×W + Burst in any window W of 100ms or longer at the provider.
	// Zero means MaxLateness / 100ms (2% with the default MaxLateness); a
	// negative value means none: the schedule runs at Rate.
	Headroom float64 `yaml:"headroom"`
	// Adaptive lets the provider's throttling answers lower the rate for
	// the whole cluster and clean answers raise it back to Rate (see
	// Feedback). Off in a zero Config; the dispatcher turns it on by default.
	Adaptive Adaptive `yaml:"adaptive"`
	// Clock is the replica's clock for waiting until a slot. Zero means the
	// system clock. The schedule itself runs on Redis time.
	Clock Clock `yaml:"-"`
	// Tenants are per-tenant sub-limits under Rate (tenants.go). Zero means
	// none: only the global rate applies, at no extra cost.
	Tenants Tenants `yaml:"tenants"`
	// DegradedConfig says what the pacer does while Redis cannot be
	// reached: its keys are pacer.when_unavailable, pacer.degraded_safety
	// and pacer.max_degraded (see degraded.go).
	DegradedConfig `yaml:",squash"`
}

// Adaptive configures the effective rate that the provider's answers
// steer, one for the cluster, kept in Redis beside the schedule. Rate (or
// an operator's override) stays the ceiling. Zero values mean the
// documented default.
type Adaptive struct {
	// Enabled turns it on: replicas report their answers with a Feedback,
	// and the schedule runs at the effective rate while the provider
	// pushes back. Off, a throttling answer only holds the schedule for its
	// Retry-After (Pacer.Throttle), each time one comes.
	Enabled bool `yaml:"enabled"`
	// Window is the reaction window: the cluster's answers are judged once
	// per window, so the rate moves at most once per window. Zero means 1s.
	Window time.Duration `yaml:"window"`
	// Tolerance is the share of throttling answers in a window that the
	// rate does not react to. Zero means 0.01.
	Tolerance float64 `yaml:"tolerance"`
	// Increase is how fast the rate climbs back: after a clean window it
	// rises by Increase × the ceiling, after the next by twice that, and so
	// on while windows stay clean. Zero means 0.0025 (from 75% to 100% of
	// the ceiling in about 14 clean windows).
	Increase float64 `yaml:"increase"`
	// Floor is the lowest effective rate, as a fraction of the ceiling.
	// Zero means 0.05.
	Floor float64 `yaml:"floor"`
	// MaxHold caps the hold a Retry-After asks for. A Retry-After is
	// honoured once per episode of throttling, not once per answer. Zero
	// means 30s.
	MaxHold time.Duration `yaml:"max_hold"`
}

// Clock tells the time.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// MaxRate is the highest rate a schedule may run at, slots per second:
// far above any provider's cap, and high enough that a benchmark of the
// pacer's own speed does not meet it.
const MaxRate = 10_000_000

// MinRate is the lowest rate a schedule may run at, slots per second: one
// slot in about 17 minutes. Below it a slot's interval in microseconds no
// longer fits the pacer's durations.
const MinRate = 0.001

// validRate reports whether rate is a rate a schedule may run at: finite,
// between MinRate and MaxRate.
func validRate(rate float64) bool { return rate >= MinRate && rate <= MaxRate }

// Defaults applied by SetDefaults.
const (
	DefaultHorizon = 50 * time.Millisecond
	// MaxHorizon is the longest horizon Validate accepts.
	MaxHorizon         = 10 * time.Second
	DefaultMaxBatch    = 256
	DefaultMaxLateness = 2 * time.Millisecond
	// headroomWindow is the shortest window the default headroom covers.
	headroomWindow = 100 * time.Millisecond
	// pausePoll is how often a paused replica asks again.
	pausePoll = 100 * time.Millisecond
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// SetDefaults fills the zero fields with their defaults.
func (c *Config) SetDefaults() {
	if c.Burst == 0 {
		c.Burst = 1
	}
	if c.Horizon == 0 {
		c.Horizon = DefaultHorizon
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxLateness == 0 {
		c.MaxLateness = DefaultMaxLateness
	}
	if c.Headroom == 0 {
		c.Headroom = float64(c.MaxLateness) / float64(headroomWindow)
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	c.DegradedConfig.setDefaults()
	c.Adaptive.setDefaults()
}

// Defaults of Adaptive, applied by Config.SetDefaults.
const (
	DefaultAdaptiveWindow    = time.Second
	DefaultAdaptiveTolerance = 0.01
	DefaultAdaptiveIncrease  = 0.0025
	DefaultAdaptiveFloor     = 0.05
	DefaultAdaptiveMaxHold   = 30 * time.Second
)

func (a *Adaptive) setDefaults() {
	if a.Window == 0 {
		a.Window = DefaultAdaptiveWindow
	}
	if a.Tolerance == 0 {
		a.Tolerance = DefaultAdaptiveTolerance
	}
	if a.Increase == 0 {
		a.Increase = DefaultAdaptiveIncrease
	}
	if a.Floor == 0 {
		a.Floor = DefaultAdaptiveFloor
	}
	if a.MaxHold == 0 {
		a.MaxHold = DefaultAdaptiveMaxHold
	}
}

func (a *Adaptive) validate(bad func(key, format string, args ...any)) {
	if a.Window < 100*time.Millisecond || a.Window > time.Minute {
		bad("adaptive.window", "must be between 100ms and 1m, got %s", a.Window)
	}
	if !(a.Tolerance > 0) || a.Tolerance > 0.5 {
		bad("adaptive.tolerance", "must be more than 0 and at most 0.5 (a share of answers), got %v", a.Tolerance)
	}
	if !(a.Increase > 0) || a.Increase > 1 {
		bad("adaptive.increase", "must be more than 0 and at most 1 (a fraction of the rate), got %v", a.Increase)
	}
	if !(a.Floor > 0) || a.Floor > 1 {
		bad("adaptive.floor", "must be more than 0 and at most 1 (a fraction of the rate), got %v", a.Floor)
	}
	if a.MaxHold < time.Second || a.MaxHold > time.Hour {
		bad("adaptive.max_hold", "must be between 1s and 1h, got %s", a.MaxHold)
	}
}

// Validate reports every problem of the configuration, each a
// *setting.Error naming its key under "pacer." and wrapping
// ErrInvalidConfig, joined with errors.Join.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, setting.Errorf(ErrInvalidConfig, "pacer."+key, format, args...))
	}
	if !nameRE.MatchString(c.Name) {
		bad("name", "%q must be 1-64 letters, digits, '_' or '-'", c.Name)
	}
	if !validRate(c.Rate) {
		bad("rate", "must be between %g and %d slots/s, got %v", MinRate, int(MaxRate), c.Rate)
	}
	if c.Burst < 0 || c.Burst > 1e6 {
		bad("burst", "must be between 1 and 1000000, got %d", c.Burst)
	}
	if c.Horizon < 0 || (c.Horizon > 0 && c.Horizon < time.Millisecond) || c.Horizon > MaxHorizon {
		bad("horizon", "must be between 1ms and %s, got %s", MaxHorizon, c.Horizon)
	}
	if c.MaxBatch < 0 || c.MaxBatch > 10000 {
		bad("max_batch", "must be between 1 and 10000, got %d", c.MaxBatch)
	}
	if c.MaxLateness < 0 || c.MaxLateness > time.Second {
		bad("max_lateness", "must be between 0 and 1s, got %s", c.MaxLateness)
	}
	if !(c.Headroom < 0.5) { // NaN too: it would reach the shared schedule
		bad("headroom", "must be less than 0.5 (a fraction of the rate; negative for none), got %v", c.Headroom)
	}
	c.DegradedConfig.validate(bad)
	c.Adaptive.validate(bad)
	c.Tenants.validate(bad)
	return errors.Join(errs...)
}

// Sentinel errors of the pacer.
var (
	// ErrInvalidConfig is wrapped by Config.Validate's errors.
	ErrInvalidConfig = errors.New("pacer: invalid config")
	// ErrUnavailable is wrapped when Redis cannot be reached or answers with
	// an error: the pacer grants nothing (it fails closed) and the caller
	// should retry with backoff.
	ErrUnavailable = errors.New("pacer: redis unavailable")
	// ErrBadReply is wrapped when a script's reply has an unexpected shape.
	ErrBadReply = errors.New("pacer: unexpected script reply")
)

// HorizonFor is the least horizon at which replicas replicas, all waiting
// for slots at rate, can each hold two slots of the schedule at once (two
// intervals apiece), rounded up to 10ms; never less than DefaultHorizon
// nor more than MaxHorizon (beyond which fewer replicas is the only cure).
// Under it, most of them are refused on every call, because the horizon
// holds fewer slots than there are replicas asking, and each slot costs
// several Redis calls: in make bench's keys table, 64 replicas at 500/s
// made 4.8–5.4 calls for slots per job with the default 50ms and 1.2 with
// 250ms, and the provider saw 0.69–0.73 of the cap against 0.86–0.87 on a
// two-core machine.
func HorizonFor(rate float64, replicas int) time.Duration {
	if rate <= 0 || replicas < 1 {
		return DefaultHorizon
	}
	need := time.Duration(2 * float64(replicas) / rate * float64(time.Second))
	const step = 10 * time.Millisecond
	return min(MaxHorizon, max(DefaultHorizon, (need+step-1)/step*step))
}

// ShortHorizon reports whether horizon holds fewer slots at rate than
// replicas replicas, two or more: a schedule so shared that most replicas
// are refused on every call (see HorizonFor for the horizon to set
// instead). A lone replica is never short of one: its refusals are only
// its waits for the next slot.
func ShortHorizon(rate float64, horizon time.Duration, replicas int) bool {
	return rate > 0 && replicas >= 2 && float64(replicas) > rate*horizon.Seconds()
}
