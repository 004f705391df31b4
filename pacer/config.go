package pacer

import (
	"errors"
	"fmt"
	"regexp"
	"time"
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
	// MaxBatch is the most slots one Redis call may grant. Zero means 64.
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
	// Clock is the replica's clock for waiting until a slot. Zero means the
	// system clock. The schedule itself runs on Redis time.
	Clock Clock `yaml:"-"`
}

// Clock tells the time.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Defaults applied by SetDefaults.
const (
	DefaultHorizon     = 50 * time.Millisecond
	DefaultMaxBatch    = 64
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
}

// Validate reports every problem of the configuration, each naming its key
// under "pacer." and wrapping ErrInvalidConfig.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: pacer.%s: %s", ErrInvalidConfig, key, fmt.Sprintf(format, args...)))
	}
	if !nameRE.MatchString(c.Name) {
		bad("name", "%q must be 1-64 letters, digits, '_' or '-'", c.Name)
	}
	if !(c.Rate > 0) || c.Rate > 1e6 {
		bad("rate", "must be more than 0 and at most 1000000 slots/s, got %v", c.Rate)
	}
	if c.Burst < 0 || c.Burst > 1e6 {
		bad("burst", "must be between 1 and 1000000, got %d", c.Burst)
	}
	if c.Horizon < 0 || c.Horizon > 10*time.Second {
		bad("horizon", "must be between 1ms and 10s, got %s", c.Horizon)
	}
	if c.MaxBatch < 0 || c.MaxBatch > 10000 {
		bad("max_batch", "must be between 1 and 10000, got %d", c.MaxBatch)
	}
	if c.MaxLateness < 0 || c.MaxLateness > time.Second {
		bad("max_lateness", "must be between 0 and 1s, got %s", c.MaxLateness)
	}
	if c.Headroom >= 0.5 {
		bad("headroom", "must be less than 0.5 (a fraction of the rate; negative for none), got %v", c.Headroom)
	}
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
