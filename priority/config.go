package priority

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/setting"
)

// ErrInvalidConfig is wrapped by every error of Config.Validate.
var ErrInvalidConfig = errors.New("priority: invalid config")

// Policy is how the scheduler chooses among lanes that have a job ready.
type Policy string

// The policies.
const (
	// Strict always takes the highest lane with a job ready: a busy high
	// lane holds the lower ones back for as long as it stays busy.
	Strict Policy = "strict"
	// Weighted shares the slots among the lanes with a job ready in
	// proportion to their weights (smooth weighted round-robin), so that no
	// lane starves.
	Weighted Policy = "weighted"
)

// MaxWeight bounds a lane's weight, so that the scheduler's arithmetic
// cannot overflow whatever the number of lanes.
const MaxWeight = 1_000_000

// Lane is one priority lane.
type Lane struct {
	// Name names the lane in the queue: 1-64 letters, digits, '_' or '-'.
	// Required.
	Name string `yaml:"name"`
	// Weight is the lane's share of the slots under the weighted policy,
	// from 1 to MaxWeight; the strict policy ignores it. Zero means 1.
	Weight int `yaml:"weight"`
}

// Config is the lane part of the queue configuration (the keys lanes,
// policy and privileged_users under queue: in the YAML file).
type Config struct {
	// Lanes are the priority lanes, highest priority first. Required, at
	// least one. Jobs without a lane and from an ordinary user go to the
	// last one.
	Lanes []Lane `yaml:"lanes"`
	// Policy is Strict or Weighted. Zero means Strict.
	Policy Policy `yaml:"policy"`
	// PrivilegedUsers are the users whose jobs go to the first lane unless
	// the job names its lane. Optional.
	PrivilegedUsers []string `yaml:"privileged_users"`
}

var laneNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// SetDefaults fills the zero fields: the Strict policy and weight 1.
func (c *Config) SetDefaults() {
	if c.Policy == "" {
		c.Policy = Strict
	}
	for i := range c.Lanes {
		if c.Lanes[i].Weight == 0 {
			c.Lanes[i].Weight = 1
		}
	}
}

// Validate reports every problem of the configuration, each a
// *setting.Error naming its key as in the YAML file
// ("queue.lanes[1].weight: must be >= 1, got 0") and wrapping
// ErrInvalidConfig, joined with errors.Join. Call SetDefaults first: a
// zero weight or policy is reported as wrong.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, setting.Errorf(ErrInvalidConfig, "queue."+key, format, args...))
	}
	if len(c.Lanes) == 0 {
		bad("lanes", "at least one lane is required")
	}
	seen := make(map[string]bool, len(c.Lanes))
	for i, l := range c.Lanes {
		switch {
		case !laneNameRE.MatchString(l.Name):
			bad(fmt.Sprintf("lanes[%d].name", i), "must be 1-64 letters, digits, '_' or '-', got %q", l.Name)
		case seen[l.Name]:
			bad(fmt.Sprintf("lanes[%d].name", i), "duplicate lane %q", l.Name)
		}
		seen[l.Name] = true
		switch {
		case l.Weight < 1:
			bad(fmt.Sprintf("lanes[%d].weight", i), "must be >= 1, got %d", l.Weight)
		case l.Weight > MaxWeight:
			bad(fmt.Sprintf("lanes[%d].weight", i), "must be <= %d, got %d", MaxWeight, l.Weight)
		}
	}
	if c.Policy != Strict && c.Policy != Weighted {
		bad("policy", "must be strict or weighted, got %q", c.Policy)
	}
	for i, u := range c.PrivilegedUsers {
		if u == "" {
			bad(fmt.Sprintf("privileged_users[%d]", i), "must not be empty")
		}
	}
	return errors.Join(errs...)
}

// LaneNames returns the lanes' names, highest priority first, as the queue
// configuration wants them.
func (c *Config) LaneNames() []string {
	names := make([]string, len(c.Lanes))
	for i, l := range c.Lanes {
		names[i] = l.Name
	}
	return names
}

// Route returns the lane a job goes to: the job's own lane when it names
// one (the queue checks that it exists), else the first lane when the job's
// user is privileged, else the last lane, the lowest. It returns "" when the
// configuration has no lanes. Route does not change the job.
func (c *Config) Route(j *queue.Job) string {
	if j.Lane != "" {
		return j.Lane
	}
	if len(c.Lanes) == 0 {
		return ""
	}
	if j.User != "" && slices.Contains(c.PrivilegedUsers, j.User) {
		return c.Lanes[0].Name
	}
	return c.Lanes[len(c.Lanes)-1].Name
}
