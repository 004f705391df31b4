// Command mockprovider runs the mock provider of package mockprovider: an
// HTTP server that records what sluice's HTTP sink sends it and answers
// like a rate-capped provider. On SIGINT or SIGTERM it shuts down, prints
// its report to stdout, writes the chart when --chart is given, and exits 0.
// Bad flags exit 2 naming the flag; a server that cannot start exits 1.
//
//	mockprovider --listen 127.0.0.1:8080 --cap 400 --throttle-share 0.01 --chart out.svg
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command's flags beside the provider's configuration.
type options struct {
	cfg   mockprovider.Config
	chart string
}

// parseFlags reads args into options. It returns pflag.ErrHelp for --help.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := pflag.NewFlagSet("mockprovider", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.cfg.Listen, "listen", mockprovider.DefaultListen, "host:port to listen on (port 0 picks a free one)")
	fs.BoolVar(&o.cfg.AllowRemote, "allow-remote", false, "allow --listen on a non-loopback address")
	fs.StringVar(&o.cfg.Path, "path", mockprovider.DefaultPath, "URL path jobs are POSTed to")
	fs.DurationVar(&o.cfg.Latency, "latency", 0, "delay added to every answer")
	fs.Float64Var(&o.cfg.ThrottleShare, "throttle-share", 0, "share of requests (0..1) answered 429 with Retry-After")
	fs.DurationVar(&o.cfg.RetryAfter, "retry-after", mockprovider.DefaultRetryAfter, "Retry-After sent with a 429 (whole seconds, rounded up)")
	fs.Float64Var(&o.cfg.ErrorShare, "error-share", 0, "share of requests (0..1) answered 500")
	fs.Float64Var(&o.cfg.RejectShare, "reject-share", 0, "share of requests (0..1) answered 400 with a JSON error")
	fs.Float64Var(&o.cfg.Capacity, "capacity", 0, "the provider's own limit: requests accepted per sliding second, the rest answered 429 (0: none; POST /capacity?rps=N changes it)")
	fs.Int64Var(&o.cfg.Seed, "seed", 0, "seed of the random choice of answers")
	fs.Float64Var(&o.cfg.Cap, "cap", 0, "the dispatcher's rate cap (requests/s), for the report and the chart")
	fs.IntVar(&o.cfg.MaxArrivals, "max-arrivals", mockprovider.DefaultMaxArrivals, "arrivals kept in memory; the oldest are dropped past it")
	fs.BoolVar(&o.cfg.KeepBodies, "keep-bodies", false, "keep request bodies in /arrivals")
	fs.StringVar(&o.chart, "chart", "", "on exit, write the chart to this .svg or .png file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// Flags that are given must be valid as given: an explicit zero is not
	// turned into a default.
	if fs.Changed("retry-after") && o.cfg.RetryAfter == 0 {
		return o, errors.New("--retry-after: must be positive")
	}
	if fs.Changed("max-arrivals") && o.cfg.MaxArrivals == 0 {
		return o, errors.New("--max-arrivals: must be at least 1")
	}
	o.cfg.SetDefaults()
	return o, o.cfg.Validate()
}

// run is the command: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	o, err := parseFlags(args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mockprovider: %v\n", err)
		return 2
	}
	p, err := mockprovider.New(o.cfg)
	if err != nil {
		fmt.Fprintf(stderr, "mockprovider: %v\n", err)
		return 2
	}
	if err := p.Start(ctx); err != nil {
		log.Error("cannot start", "listen", o.cfg.Listen, "err", err)
		return 1
	}
	log.Info("listening", "addr", p.Addr().String(), "url", p.URL(),
		"throttle_share", o.cfg.ThrottleShare, "error_share", o.cfg.ErrorShare,
		"reject_share", o.cfg.RejectShare, "latency", o.cfg.Latency, "cap", o.cfg.Cap, "capacity", o.cfg.Capacity)
	<-ctx.Done()
	log.Info("shutting down")
	code := 0
	if err := p.Close(); err != nil {
		log.Error("shutdown", "err", err)
		code = 1
	}
	if err := p.Report(time.Time{}, time.Time{}).WriteText(stdout); err != nil {
		log.Error("report", "err", err)
		code = 1
	}
	if o.chart != "" {
		if err := p.WriteChart(o.chart); err != nil {
			log.Error("chart", "file", o.chart, "err", err)
			if !errors.Is(err, mockprovider.ErrNoArrivals) {
				code = 1
			}
		} else {
			log.Info("chart written", "file", o.chart)
		}
	}
	return code
}
