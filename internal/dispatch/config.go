package dispatch

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/setting"
)

// Config configures one replica's engine. Zero values mean the documented
// default.
//
// The dispatch: section of the configuration file decodes into it: the
// fields with a yaml tag are its keys. The fields tagged "-" are not keys
// of that section: the loader sets them from the keys of the sections
// that own them (named on each field), or leaves them to their defaults.
type Config struct {
	// MaxInFlight bounds the requests open to the provider at once. Zero
	// means 256. The loader sets it from sink.max_in_flight: the sink owns
	// the bound, the engine keeps to it.
	MaxInFlight int `yaml:"-"`
	// BackoffMin and BackoffMax bound the delay before a transient failure
	// is retried: BackoffMin × 2^(attempt-1), capped at BackoffMax, with
	// jitter (a uniform draw from the upper half). Zero means 1s and 5m.
	// The loader sets them from queue.backoff.min and queue.backoff.max.
	BackoffMin time.Duration `yaml:"-"`
	BackoffMax time.Duration `yaml:"-"`
	// ShutdownTimeout is how long Run waits for requests in flight after its
	// context ends, before it cancels them; their jobs go back to the
	// queue (Release), not retried as failures. Zero means 10s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// RateHint is the expected rate in jobs/s (the pacer's rate): with
	// Lookahead it sizes how many jobs each lane holds fetched ahead of its
	// slots. Zero means 100. The loader sets it from pacer.rate.
	RateHint float64 `yaml:"-"`
	// Lookahead is how far ahead of their slots jobs are fetched. Zero means 500ms.
	Lookahead time.Duration `yaml:"-"`
	// MaxLaneBuffer caps the jobs held fetched per lane. Zero means 64.
	MaxLaneBuffer int `yaml:"-"`
	// VisibilityTimeout is the queue's; jobs held longer than a third of it
	// are extended. Zero means 30s. The loader sets it from
	// queue.visibility_timeout.
	VisibilityTimeout time.Duration `yaml:"-"`
	// DefaultThrottle is how long the cluster holds back after a throttling
	// answer without a usable Retry-After. Zero means 1s.
	DefaultThrottle time.Duration `yaml:"-"`
	// MaxThrottle caps how long one throttling answer holds the cluster
	// back, whatever its Retry-After says. Zero means 1m.
	MaxThrottle time.Duration `yaml:"-"`
	// Now is the clock. Zero means time.Now.
	Now func() time.Time `yaml:"-"`
	// Rand draws backoff jitter in [0,1). Zero means math/rand/v2.Float64.
	Rand func() float64 `yaml:"-"`
}

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("dispatch: invalid config")

// SetDefaults fills the zero fields with their defaults.
func (c *Config) SetDefaults() {
	setDur := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 256
	}
	setDur(&c.BackoffMin, time.Second)
	setDur(&c.BackoffMax, 5*time.Minute)
	setDur(&c.ShutdownTimeout, 10*time.Second)
	setDur(&c.Lookahead, 500*time.Millisecond)
	setDur(&c.VisibilityTimeout, 30*time.Second)
	setDur(&c.DefaultThrottle, time.Second)
	setDur(&c.MaxThrottle, time.Minute)
	if c.RateHint == 0 {
		c.RateHint = 100
	}
	if c.MaxLaneBuffer == 0 {
		c.MaxLaneBuffer = 64
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
}

// Validate reports every problem of the configuration, each a
// *setting.Error naming the configuration key it comes from and wrapping
// ErrInvalidConfig, joined with errors.Join. Call SetDefaults first.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, setting.Errorf(ErrInvalidConfig, key, format, args...))
	}
	if c.MaxInFlight < 1 {
		bad("sink.max_in_flight", "must be at least 1, got %d", c.MaxInFlight)
	}
	switch {
	case c.BackoffMin <= 0:
		bad("queue.backoff.min", "must be positive, got %s", c.BackoffMin)
	case c.BackoffMax < c.BackoffMin:
		bad("queue.backoff.max", "must be at least queue.backoff.min (%s), got %s", c.BackoffMin, c.BackoffMax)
	}
	if c.ShutdownTimeout <= 0 {
		bad("dispatch.shutdown_timeout", "must be positive, got %s", c.ShutdownTimeout)
	}
	if c.RateHint < 0 {
		bad("pacer.rate", "must not be negative, got %v", c.RateHint)
	}
	if c.Lookahead < 0 {
		bad("dispatch.lookahead", "must not be negative, got %s", c.Lookahead)
	}
	if c.MaxLaneBuffer < 0 {
		bad("dispatch.max_lane_buffer", "must not be negative, got %d", c.MaxLaneBuffer)
	}
	return errors.Join(errs...)
}

// laneTarget is how many jobs a lane holds fetched. The lowest lane holds
// enough for Lookahead at this replica's share of RateHint, or at the rate
// it can send (sendRate: its room in flight over the provider's answer
// time, 0 when unknown) when that is less, so that a replica with little
// room does not hold jobs the others could send: any job above it takes
// the slot first anyway. Higher lanes hold two fetch chunks (about 20ms of
// slots), so that a burst in them is shared by every replica. At least 1,
// at most MaxLaneBuffer.
func (c *Config) laneTarget(lowest bool, replicas int, sendRate float64) int {
	n := 2 * c.fetchChunk(replicas)
	if lowest {
		rate := c.RateHint / float64(max(replicas, 1))
		if sendRate > 0 {
			rate = min(rate, sendRate)
		}
		n = int(rate*c.Lookahead.Seconds()) + 1
	}
	return min(max(n, 1), c.MaxLaneBuffer)
}

// fetchChunk is the most jobs one fetch takes: about 10ms of this
// replica's share of RateHint. Small chunks spread a burst of privileged
// jobs over every replica, so that all of them send it first, instead of
// one replica holding the burst while the others go on with a lower lane.
//
// replicas is how many replicas share the rate (at least 1): each fetches
// its share.
func (c *Config) fetchChunk(replicas int) int {
	return min(max(int(math.Ceil(c.RateHint*0.01/float64(max(replicas, 1)))), 1), c.MaxLaneBuffer)
}

// backoff is the delay before retry number attempt (1-based) of a job.
func (c *Config) backoff(attempt int) time.Duration {
	d := c.BackoffMin
	for i := 1; i < attempt && d < c.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.BackoffMax)
	return d/2 + time.Duration(c.Rand()*float64(d/2))
}
