// Command demo runs sluice end to end inside one process, with nothing to
// install: an embedded Redis (miniredis) or NATS JetStream server, the mock
// provider, two dispatcher replicas and a burst of jobs into a capped
// queue. It prints a live view once a second, then the provider's report
// and a chart. `dispatcher --demo` runs the same demo from a dispatcher
// built without -tags production.
//
//	demo                       # 2,000 jobs into a 100/s cap on embedded Redis
//	demo --backend nats --jobs 500
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line and returns the exit code: 0 done, 1 a
// failure at run time, 2 bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var (
		o   demo.Options
		log cli.Flags
	)
	root := &cobra.Command{
		Use:           "demo",
		Short:         "Run sluice end to end on this machine: embedded servers, provider, 2 replicas, a burst of jobs",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), o, log, stdout, stderr)
		},
	}
	demo.RegisterFlags(root.Flags(), "", &o)
	// The live view is the output; replicas only speak up when something is wrong.
	root.Flags().StringVar(&log.LogLevel, "log-level", "warn", "the replicas' log level: debug, info, warn or error")
	root.Flags().StringVar(&log.LogFormat, "log-format", "text", "text or json")
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return cli.ExitOK
	}
	fmt.Fprintln(stderr, "demo:", err)
	return cli.ExitCode(err)
}

// runDemo runs one demo with the logger the flags ask for.
func runDemo(ctx context.Context, o demo.Options, f cli.Flags, stdout, stderr io.Writer) error {
	log, err := f.Logger(stderr)
	if err != nil {
		return err
	}
	if err := o.Check(""); err != nil {
		return cli.Usage(err)
	}
	o.Out, o.Log = stdout, log
	if _, err := demo.Run(ctx, o); err != nil {
		return cli.Failure(err)
	}
	return nil
}
