package demo

import "github.com/spf13/pflag"

// RegisterFlags adds the demo's flags to fs, each name prefixed with
// prefix ("demo-" for dispatcher --demo, "" for the demo command), writing
// into o. The defaults shown are Options' zero-value defaults.
func RegisterFlags(fs *pflag.FlagSet, prefix string, o *Options) {
	fs.StringVar(&o.Backend, prefix+"backend", "redis", "queue of the demo: redis (embedded miniredis) or nats (embedded JetStream)")
	fs.IntVar(&o.Jobs, prefix+"jobs", 2000, "jobs the demo bursts into the queue")
	fs.StringVar(&o.Chart, prefix+"chart", "", "where the demo writes its chart (.svg or .png; default sluice-demo.svg in the temp dir)")
}
