package dispatch

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Config configures one replica's engine. Zero values mean the documented
// default.
type Config struct {
	// MaxInFlight bounds the requests open to the provider at once. Zero
	// means 256.
	MaxInFlight int
	// BackoffMin and BackoffMax bound the delay before a transient failure
	// is retried: BackoffMin × 2^(attempt-1), capped at BackoffMax, with
	// jitter (a uniform draw from the upper half). Zero means 1s and 5m.
	BackoffMin, BackoffMax time.Duration
	// ShutdownTimeout is how long Run waits for requests in flight after its
	// context ends, before it cancels them. Zero means 10s.
	ShutdownTimeout time.Duration
	// RateHint is the expected rate in jobs/s (the pacer's rate): with
	// Lookahead it sizes how many jobs each lane holds fetched ahead of its
	// slots. Zero means 100.
	RateHint float64
	// Lookahead is how far ahead of their slots jobs are fetched. Zero means 500ms.
	Lookahead time.Duration
	// MaxLaneBuffer caps the jobs held fetched per lane. Zero means 64.
	MaxLaneBuffer int
	// VisibilityTimeout is the queue's; jobs held longer than a third of it
	// are extended. Zero means 30s.
	VisibilityTimeout time.Duration
	// DefaultThrottle is how long the cluster holds back after a throttling
	// answer without a usable Retry-After. Zero means 1s.
	DefaultThrottle time.Duration
	// MaxThrottle caps how long one throttling answer holds the cluster
	// back, whatever its Retry-After says. Zero means 1m.
	MaxThrottle time.Duration
	// Now is the clock. Zero means time.Now.
	Now func() time.Time
	// Rand draws backoff jitter in [0,1). Zero means math/rand/v2.Float64.
	Rand func() float64
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

// Validate reports every problem of the configuration.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, key, fmt.Sprintf(format, args...)))
	}
	if c.MaxInFlight < 1 {
		bad("sink.max_in_flight", "must be at least 1, got %d", c.MaxInFlight)
	}
	if c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin {
		bad("queue.backoff", "min must be positive and at most max, got min %s, max %s", c.BackoffMin, c.BackoffMax)
	}
	if c.ShutdownTimeout < 0 {
		bad("dispatch.shutdown_timeout", "must not be negative, got %s", c.ShutdownTimeout)
	}
	if c.RateHint < 0 || c.Lookahead < 0 || c.MaxLaneBuffer < 0 {
		bad("dispatch", "rate hint, lookahead and lane buffer must not be negative")
	}
	return errors.Join(errs...)
}

// laneTarget is how many jobs a lane holds fetched. The lowest lane holds
// enough for Lookahead at this replica's share of RateHint: any job above it takes the slot first
// anyway. Higher lanes hold two fetch chunks (about 20ms of slots), so
// that a burst in them is shared by every replica. At least 1, at most
// MaxLaneBuffer.
func (c *Config) laneTarget(lowest bool, replicas int) int {
	n := 2 * c.fetchChunk(replicas)
	if lowest {
		n = int(c.RateHint*c.Lookahead.Seconds()/float64(max(replicas, 1))) + 1
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
