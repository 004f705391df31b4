package demo

import (
	"errors"
	"fmt"
	"math"

	"github.com/spf13/pflag"
)

// RegisterFlags adds the demo's flags to fs, each name prefixed with
// prefix ("demo-" for dispatcher --demo, "" for the demo command), writing
// into o. The defaults shown are Options' zero-value defaults.
func RegisterFlags(fs *pflag.FlagSet, prefix string, o *Options) {
	fs.StringVar(&o.Backend, prefix+"backend", "redis", "queue of the demo: redis (embedded miniredis) or nats (embedded JetStream)")
	fs.IntVar(&o.Jobs, prefix+"jobs", 2000, "jobs the demo bursts into the queue")
	fs.StringVar(&o.Chart, prefix+"chart", "", "where the demo writes its chart (.svg or .png; default sluice-demo.svg in the temp dir)")
}

// Check returns what is wrong with the options a user sets (the flags of
// RegisterFlags, each named with prefix), nil when nothing is. Zero
// values are fine: they mean the defaults.
func (o Options) Check(prefix string) error {
	var errs []error
	if o.Backend != "" && o.Backend != "redis" && o.Backend != "nats" {
		errs = append(errs, fmt.Errorf("--%sbackend: must be redis or nats, got %q", prefix, o.Backend))
	}
	if o.Jobs < 0 || o.Jobs > MaxJobs {
		errs = append(errs, fmt.Errorf("--%sjobs: must be between 1 and %d, got %d", prefix, MaxJobs, o.Jobs))
	}
	if o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		errs = append(errs, fmt.Errorf("rate: must be more than 0, got %v", o.Rate))
	}
	if o.Replicas < 0 {
		errs = append(errs, fmt.Errorf("replicas: must be at least 1, got %d", o.Replicas))
	}
	return errors.Join(errs...)
}

// MaxJobs bounds a demo's burst: the jobs are built in memory at once.
const MaxJobs = 1_000_000
