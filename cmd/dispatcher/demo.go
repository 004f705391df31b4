package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/cli"

	"github.com/sluicehq/sluice/internal/demo"
)

// demoFlags are the flags of --demo.
type demoFlags struct {
	enabled bool
	opts    demo.Options
}

func (d *demoFlags) register(root *cobra.Command) {
	f := root.Flags()
	f.BoolVar(&d.enabled, "demo", false, "run everything embedded on this machine (Redis, provider, 2 replicas, a burst of jobs): no servers needed")
	f.StringVar(&d.opts.Backend, "demo-backend", "redis", "queue of the demo: redis (embedded miniredis) or nats (embedded JetStream)")
	f.IntVar(&d.opts.Jobs, "demo-jobs", 2000, "jobs the demo bursts into the queue")
	f.StringVar(&d.opts.Chart, "demo-chart", "", "where the demo writes its chart (.svg or .png; default sluice-demo.svg in the temp dir)")
}

func runDemo(ctx context.Context, g *globals, d demoFlags) error {
	if g.LogLevel == "info" { // the live view is the output; replicas only speak up when something is wrong
		g.LogLevel = "warn"
	}
	log, err := g.logger()
	if err != nil {
		return err
	}
	o := d.opts
	o.Out, o.Log, o.Timeout = g.stdout, log, 2*time.Minute
	if _, err := demo.Run(ctx, o); err != nil {
		return cli.Failure(err)
	}
	return nil
}
