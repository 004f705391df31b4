// Command dispatcher runs one sluice replica: it drains the queue toward the
// provider at the cluster-wide rate kept in Redis, privileged lanes first.
// Run as many as you like on the same configuration.
//
//	dispatcher --config configs/sluice.yaml     # run one replica
//	dispatcher --demo                           # everything embedded, no servers needed (not with -tags production)
//	dispatcher status | set-rate N | pause | resume | dlq list|show|requeue|delete|purge | job show
//	dispatcher serve-api                        # the HTTP ingest API, for producers in any language
//
// SIGINT or SIGTERM stops a replica cleanly (within
// dispatch.shutdown_timeout); a second one exits at once with 128 + the
// signal's number.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/cli"
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
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go cli.OnSignals(sigs, cancel, os.Stderr, os.Exit,
		"dispatcher: exiting without waiting for the requests in flight; the jobs this replica held come back after the visibility timeout")
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(sigs)
	os.Exit(code)
}

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
	return cli.ExitCode(err)
}

// globals are the flags every command shares, and the output streams.
type globals struct {
	cli.Flags
	stdout io.Writer
	stderr io.Writer
	// portFile, when set, is where a replica writes its admin address.
	portFile string
}

// flagKeys are the configuration keys that have a flag of their own.
var flagKeys = []cli.Key{
	{Flag: "rate", Key: "pacer.rate", Usage: "the provider's cap for the whole cluster, requests/s (pacer.rate)"},
	{Flag: "burst", Key: "pacer.burst", Usage: "slots that may go at once after idling (pacer.burst)"},
	{Flag: "backend", Key: "queue.backend", Usage: "queue backend: redis or nats (queue.backend)"},
	{Flag: "queue", Key: "queue.name", Usage: "logical queue name (queue.name)"},
	{Flag: "redis-url", Key: "redis.url", Usage: "Redis URL for the pacer, and the queue with backend redis (redis.url)"},
	{Flag: "nats-url", Key: "nats.url", Usage: "NATS URL, with backend nats (nats.url)"},
	{Flag: "sink-url", Key: "sink.url", Usage: "where jobs are POSTed (sink.url)"},
	{Flag: "metrics-listen", Key: "metrics.listen", Usage: "host:port of /metrics, /healthz, /readyz, or off (metrics.listen)"},
	{Flag: "api-listen", Key: "api.listen", Usage: "host:port of the ingest API of serve-api (api.listen)"},
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
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
				if unused := notForDemo(cmd); len(unused) > 0 {
					return cli.Usagef("--demo runs everything embedded with its own settings: %s not used with it (the demo's own are --demo-*)",
						strings.Join(unused, ", "))
				}
				return runDemo(cmd.Context(), g, demo)
			}
			return runReplica(cmd.Context(), g)
		},
	}
	g.Register(root.PersistentFlags(), flagKeys)
	root.Flags().StringVar(&g.portFile, "port-file", "", "write the address metrics.listen got (host:port; useful with port 0) to this file, removed at exit; refused with metrics.listen: off")
	demo.register(root)
	root.AddCommand(statusCmd(g), setRateCmd(g), pauseCmd(g, true), pauseCmd(g, false), dlqCmd(g), jobCmd(g), configCmd(g), serveAPICmd(g))
	return root
}

// load reads the configuration: file, environment, then the flags given.
func (g *globals) load() (*config.Config, error) {
	cfg, err := config.Load(g.Path(), os.Environ(), g.Overrides())
	if err != nil {
		return nil, cli.Usage(err)
	}
	return cfg, nil
}

// logger builds the logger the flags ask for, writing to stderr.
func (g *globals) logger() (*slog.Logger, error) { return g.Logger(g.stderr) }

// openWith opens the queue and pacer of a loaded configuration.
func (g *globals) openWith(ctx context.Context, cfg *config.Config) (*replica.Parts, error) {
	log, err := g.logger()
	if err != nil {
		return nil, err
	}
	redis.SetLogger(cli.QuietRedis{}) // go-redis' own dial retries are reported by sluice
	p, err := replica.Open(ctx, cfg, replica.Options{Log: log})
	if err != nil {
		return nil, cli.Failure(err)
	}
	return p, nil
}

// runReplica runs one replica until SIGINT or SIGTERM, then shuts down
// gracefully and exits 0.
func runReplica(ctx context.Context, g *globals) error {
	cfg, err := g.load()
	if err != nil {
		return err
	}
	if g.portFile != "" && cfg.Metrics.Listen == config.MetricsOff {
		return cli.Usagef("--port-file: nothing to write with metrics.listen: %s (no listener); drop --port-file or give metrics.listen an address", config.MetricsOff)
	}
	parts, err := g.openWith(ctx, cfg)
	if err != nil {
		return err
	}
	defer parts.Close()
	r, err := replica.New(parts)
	if err != nil {
		return cli.Failure(err)
	}
	addr, err := r.Listen()
	if err != nil {
		return cli.Failure(err)
	}
	if addr != nil {
		parts.Log.Info("sluice: metrics", "url", "http://"+addr.String()+"/metrics")
		parts.Log.Info("sluice: console", "url", "http://"+addr.String()+"/console/")
		if g.portFile != "" {
			if err := writePortFile(g.portFile, addr.String()); err != nil {
				return cli.Failure(err)
			}
			defer os.Remove(g.portFile)
		}
	}
	if err := r.Run(ctx); err != nil {
		return cli.Failure(err)
	}
	parts.Log.Info("sluice: replica stopped")
	return nil
}

// writePortFile writes addr to path whole or not at all (a temporary file
// renamed into place), so that a reader never sees half an address.
func writePortFile(path, addr string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
		return fmt.Errorf("--port-file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("--port-file: %w", err)
	}
	return nil
}

// notForDemo lists the flags given on the command line that --demo does
// not use: every one but --demo, --demo-* and the log flags.
func notForDemo(cmd *cobra.Command) []string {
	var out []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "demo" && !strings.HasPrefix(f.Name, "demo-") && f.Name != "log-level" && f.Name != "log-format" {
			out = append(out, "--"+f.Name)
		}
	})
	return out
}
