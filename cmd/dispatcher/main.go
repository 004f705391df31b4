// Command dispatcher runs one sluice replica: it drains the queue toward the
// provider at the cluster-wide rate kept in Redis, privileged lanes first.
// Run as many as you like on the same configuration.
//
//	dispatcher --config configs/sluice.yaml     # run one replica
//	dispatcher --demo                           # everything embedded, no servers needed
//	dispatcher status | set-rate N | pause | resume | dlq list | dlq requeue
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/replica"
)

// defaultGCPercent is the garbage collector's target when GOGC is not set.
// A replica's live heap is small (tens of MB) and it allocates per request,
// so collecting less often buys throughput for little memory; GOGC in the
// environment overrides it.
const defaultGCPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// run executes the command line and returns the exit code: 0 done, 1 a
// failure at run time, 2 bad usage or configuration.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "dispatcher:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 2 // cobra's own errors: unknown flag or command
}

// globals are the flags every command shares.
type globals struct {
	configPath string
	overrides  map[string]*string // dotted config key -> flag value
	logLevel   string
	logFormat  string
	stdout     io.Writer
	stderr     io.Writer
}

// flagKeys are the configuration keys that have a flag of their own.
var flagKeys = []struct{ flag, key, usage string }{
	{"rate", "pacer.rate", "the provider's cap for the whole cluster, requests/s (pacer.rate)"},
	{"burst", "pacer.burst", "slots that may go at once after idling (pacer.burst)"},
	{"backend", "queue.backend", "queue backend: redis or nats (queue.backend)"},
	{"queue", "queue.name", "logical queue name (queue.name)"},
	{"redis-url", "redis.url", "Redis URL for the pacer, and the queue with backend redis (redis.url)"},
	{"nats-url", "nats.url", "NATS URL, with backend nats (nats.url)"},
	{"sink-url", "sink.url", "where jobs are POSTed (sink.url)"},
	{"metrics-listen", "metrics.listen", "host:port of /metrics, /healthz, /readyz, or off (metrics.listen)"},
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{overrides: map[string]*string{}, stdout: stdout, stderr: stderr}
	var demo demoFlags
	root := &cobra.Command{
		Use:   "dispatcher",
		Short: "Drain the sluice queue toward the provider at one global, capped rate",
		Long: "dispatcher runs one sluice replica. Any number of replicas on the same configuration\n" +
			"share one token schedule in Redis: together they never exceed pacer.rate.\n" +
			"Configuration: --config FILE, then SLUICE_* environment variables (SLUICE_PACER_RATE=500\n" +
			"overrides pacer.rate), then flags.",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if demo.enabled {
				return runDemo(cmd.Context(), g, demo)
			}
			return runReplica(cmd.Context(), g)
		},
	}
	pf := root.PersistentFlags()
	pf.StringVarP(&g.configPath, "config", "c", "", "YAML configuration file (configs/sluice.yaml is an example)")
	pf.StringVar(&g.logLevel, "log-level", "info", "debug, info, warn or error")
	pf.StringVar(&g.logFormat, "log-format", "text", "text or json")
	for _, f := range flagKeys {
		g.overrides[f.key] = pf.String(f.flag, "", f.usage)
	}
	demo.register(root)
	root.AddCommand(statusCmd(g), setRateCmd(g), pauseCmd(g, true), pauseCmd(g, false), dlqCmd(g), configCmd(g))
	return root
}

// load reads the configuration: file, environment, then the flags given.
func (g *globals) load() (*config.Config, error) {
	flags := map[string]string{}
	for key, v := range g.overrides {
		if *v != "" {
			flags[key] = *v
		}
	}
	cfg, err := config.Load(g.configPath, os.Environ(), flags)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return cfg, nil
}

// logger builds the logger the flags ask for.
func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--log-level: %w", err)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch g.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(g.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, opts)), nil
	}
	return nil, &exitError{code: 2, err: fmt.Errorf("--log-format: must be text or json, got %q", g.logFormat)}
}

// open loads the configuration and opens the queue and pacer.
func (g *globals) open(ctx context.Context) (*replica.Parts, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, err
	}
	log, err := g.logger()
	if err != nil {
		return nil, err
	}
	redis.SetLogger(quietRedis{}) // go-redis' own dial retries are reported by sluice
	p, err := replica.Open(ctx, cfg, replica.Options{Log: log})
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	return p, nil
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// runReplica runs one replica until SIGINT or SIGTERM, then shuts down
// gracefully and exits 0.
func runReplica(ctx context.Context, g *globals) error {
	parts, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer parts.Close()
	r, err := replica.New(parts)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	addr, err := r.Listen()
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	if addr != nil {
		parts.Log.Info("sluice: metrics", "url", "http://"+addr.String()+"/metrics")
	}
	if err := r.Run(ctx); err != nil {
		return &exitError{code: 1, err: err}
	}
	parts.Log.Info("sluice: replica stopped")
	return nil
}
