package queue

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/sluicehq/sluice/setting"
)

// Config configures a queue backend. Zero values mean the documented default.
type Config struct {
	// Name is the logical queue; Redis keys and NATS subjects derive from it.
	// Required: letters, digits, '_' and '-', at most 64 characters.
	Name string `yaml:"name"`
	// Lanes are the priority lanes, highest priority first. Required, at
	// least one; names as for Name, no duplicates.
	Lanes []string `yaml:"-"`
	// VisibilityTimeout is how long a fetched job stays invisible to other
	// consumers before it is delivered again, unless acked, retried,
	// dead-lettered or extended. Zero means 30s.
	VisibilityTimeout time.Duration `yaml:"visibility_timeout"`
	// ConsumerIdleLimit is how long a consumer may leave its lanes' groups
	// untouched before a live replica removes it from them, once it holds
	// no job: this is how the consumers of replicas that died (kill -9, a
	// lost host) leave the groups. A live consumer that holds or takes jobs
	// touches its group at least every third of VisibilityTimeout (a fetch
	// or a keep-alive); one removed while its replica lives (on a lane
	// without jobs, or cut off from the backend) held nothing, so nothing
	// is lost, and its next fetch adds it again. Zero means three
	// visibility timeouts, and at least 5m, so that a replica cut off for a
	// few minutes keeps its name. Negative turns the removal off. When set,
	// at least VisibilityTimeout and 1s. Only the Redis backend has a
	// consumer per replica; JetStream's consumers are shared by every
	// replica.
	ConsumerIdleLimit time.Duration `yaml:"consumer_idle_limit"`
	// MaxAttempts is how many deliveries a job gets before it is
	// dead-lettered. Zero means 8.
	MaxAttempts int `yaml:"max_attempts"`
	// DedupWindow is how long an idempotency key is remembered. Zero means
	// 10m; when set, at least 1ms.
	DedupWindow time.Duration `yaml:"dedup_window"`
	// MaxPayloadBytes bounds a job's payload. Zero means 64 KiB.
	MaxPayloadBytes int `yaml:"max_payload_bytes"`
	// MaxCost is the largest cost a job may have: a job costing more is
	// refused at enqueue, since it would hold every lane (the privileged
	// ones too) for cost/rate seconds. Zero means 100 (DefaultMaxCost).
	MaxCost int `yaml:"max_cost"`
	// Consumer names this consumer (one per replica) in the backend. Zero
	// means a name made of the host name, process id and a random suffix.
	Consumer string `yaml:"-"`
	// Now is the clock used for enqueue stamps and expiry. Zero means time.Now.
	Now func() time.Time `yaml:"-"`
}

// Defaults applied by SetDefaults.
const (
	DefaultVisibilityTimeout = 30 * time.Second
	DefaultMaxAttempts       = 8
	DefaultDedupWindow       = 10 * time.Minute
	// MinConsumerIdleLimit is the least default ConsumerIdleLimit.
	MinConsumerIdleLimit = 5 * time.Minute
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// SetDefaults fills the zero fields with their defaults.
func (c *Config) SetDefaults() {
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if c.ConsumerIdleLimit == 0 {
		c.ConsumerIdleLimit = max(3*c.VisibilityTimeout, MinConsumerIdleLimit)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.MaxCost == 0 {
		c.MaxCost = DefaultMaxCost
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports every problem of the configuration, each a
// *setting.Error naming its key (as in the YAML file, under "queue.") and
// wrapping ErrInvalidConfig, joined with errors.Join.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, setting.Errorf(ErrInvalidConfig, "queue."+key, format, args...))
	}
	if !nameRE.MatchString(c.Name) {
		bad("name", "%q must be 1-64 letters, digits, '_' or '-'", c.Name)
	}
	if len(c.Lanes) == 0 {
		bad("lanes", "at least one lane is required")
	}
	seen := map[string]bool{}
	for i, l := range c.Lanes {
		if !nameRE.MatchString(l) {
			bad(fmt.Sprintf("lanes[%d].name", i), "%q must be 1-64 letters, digits, '_' or '-'", l)
		}
		if seen[l] {
			bad(fmt.Sprintf("lanes[%d].name", i), "duplicate lane %q", l)
		}
		seen[l] = true
	}
	if c.VisibilityTimeout < 0 || (c.VisibilityTimeout > 0 && c.VisibilityTimeout < 100*time.Millisecond) {
		bad("visibility_timeout", "must be at least 100ms, got %s", c.VisibilityTimeout)
	}
	if least := max(c.VisibilityTimeout, time.Second); c.ConsumerIdleLimit > 0 && c.ConsumerIdleLimit < least {
		bad("consumer_idle_limit", "%s must be at least queue.visibility_timeout (%s) and 1s: a live replica may leave its consumer idle for a third of the visibility timeout (negative turns the clean-up off)",
			c.ConsumerIdleLimit, c.VisibilityTimeout)
	}
	if c.MaxAttempts < 0 {
		bad("max_attempts", "must be at least 1, got %d", c.MaxAttempts)
	}
	if c.DedupWindow < 0 || (c.DedupWindow > 0 && c.DedupWindow < time.Millisecond) {
		bad("dedup_window", "must be at least 1ms (0 means %s), got %s: Redis keeps an idempotency key for whole milliseconds",
			DefaultDedupWindow, c.DedupWindow)
	}
	if c.MaxPayloadBytes < 0 || c.MaxPayloadBytes > 16<<20 {
		bad("max_payload_bytes", "must be between 1 and 16 MiB, got %d", c.MaxPayloadBytes)
	}
	if c.MaxCost < 0 || c.MaxCost > 1_000_000 {
		bad("max_cost", "must be between 1 and 1000000, got %d", c.MaxCost)
	}
	return errors.Join(errs...)
}

// DefaultLane is the lane a job without one goes to: the last (lowest) lane.
func (c *Config) DefaultLane() string {
	if len(c.Lanes) == 0 {
		return ""
	}
	return c.Lanes[len(c.Lanes)-1]
}
