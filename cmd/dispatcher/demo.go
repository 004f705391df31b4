package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// demoFlags are the flags of --demo.
type demoFlags struct {
	enabled bool
}

func (d *demoFlags) register(root *cobra.Command) {
	root.Flags().BoolVar(&d.enabled, "demo", false, "run everything embedded on this machine: no servers needed")
}

func runDemo(ctx context.Context, g *globals, d demoFlags) error {
	return &exitError{code: 2, err: fmt.Errorf("--demo: not available yet")}
}
