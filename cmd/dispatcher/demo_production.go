//go:build production

// A production build (-tags production) leaves the demo out: see demo.go.
// --demo stays a known, hidden flag so that it gets an answer that says
// where the demo went rather than "unknown flag".

package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/cli"
)

// demoFlags are the flags of --demo: only the switch, which is refused.
type demoFlags struct{ enabled bool }

func (d *demoFlags) register(root *cobra.Command) {
	f := root.Flags()
	f.BoolVar(&d.enabled, "demo", false, "not in this build")
	_ = f.MarkHidden("demo") // cannot fail: the flag was just added
}

func runDemo(context.Context, *globals, demoFlags) error {
	return cli.Usagef("--demo: this dispatcher was built with -tags production, which leaves the demo out; " +
		"run it from a checkout with `go run ./cmd/dispatcher --demo` or `go run ./cmd/demo`")
}
