//go:build !production

// The demo's wiring: built by default, so that `go run ./cmd/dispatcher
// --demo` works from a checkout, and left out with -tags production (make
// build, the Dockerfile), so that the binaries that ship link no embedded
// Redis, NATS server or charts. demo_production.go is the other half.

package main

import (
	"context"

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
	demo.RegisterFlags(f, "demo-", &d.opts)
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
	if err := o.Check("demo-"); err != nil {
		return cli.Usage(err)
	}
	o.Out, o.Log = g.stdout, log
	if _, err := demo.Run(ctx, o); err != nil {
		return cli.Failure(err)
	}
	return nil
}
