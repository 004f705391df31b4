// Command producer puts jobs into the sluice queue: one job given by flags,
// a file of JSON lines, or generated load. Jobs from privileged users go to
// the first lane unless they name a lane; the others go to the last.
//
//	producer --config configs/sluice.yaml --user alice --payload '{"to":"+15550100","text":"hi"}'
//	producer --config configs/sluice.yaml --file jobs.jsonl     # one JSON job per line
//	producer --config configs/sluice.yaml --gen 10000 --rate 500 --mix privileged=0.1
//
// Exit codes: 0 every job enqueued (duplicates included), 1 a job refused
// or a backend error, 2 bad usage or configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/config"
)

func main() {
	redis.SetLogger(quietRedis{}) // go-redis' own dial retries show as the enqueue's error
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// usageErrorf is a bad-usage error: exit code 2.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// failure is a run-time failure: exit code 1.
func failure(err error) error { return &exitError{code: 1, err: err} }

// run executes the command line and returns the exit code: 0 done, 1 a
// job refused or a failure at run time, 2 bad usage or configuration.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "producer: ") { // the producer package's errors have it already
		msg = "producer: " + msg
	}
	fmt.Fprintln(stderr, msg)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 2 // cobra's own errors: unknown flag, missing or conflicting flags
}

// globals are the flags every mode shares, and the standard streams.
type globals struct {
	configPath string
	overrides  map[string]*string // dotted config key -> flag value
	logLevel   string
	logFormat  string
	progress   string
	batch      int
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
}

// flagKeys are the configuration keys that have a flag of their own.
var flagKeys = []struct{ flag, key, usage string }{
	{"backend", "queue.backend", "queue backend: redis or nats (queue.backend)"},
	{"queue", "queue.name", "logical queue name (queue.name)"},
	{"redis-url", "redis.url", "Redis URL, with backend redis (redis.url)"},
	{"nats-url", "nats.url", "NATS URL, with backend nats (nats.url)"},
}

// maxBatch bounds --batch.
const maxBatch = 10_000

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globals{overrides: map[string]*string{}, stdin: stdin, stdout: stdout, stderr: stderr}
	var one jobFlags
	var file fileFlags
	var gen genFlags
	root := &cobra.Command{
		Use:   "producer (--payload JSON | --file PATH | --gen N) [flags]",
		Short: "Put jobs into the sluice queue",
		Long: "producer enqueues jobs: one from flags (--payload and the job flags), one per line of a\n" +
			"file of JSON jobs (--file, - for stdin), or generated load (--gen). A job on the wire is\n" +
			`{"id","lane","user","key","not_before","expires_at","cost","payload"}; only payload is required.` + "\n" +
			"Configuration: --config FILE (or SLUICE_CONFIG), then SLUICE_* environment variables, then flags.\n" +
			"Exit codes: 0 all enqueued, 1 some job refused or a backend error, 2 bad usage or configuration.",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkFlags(cmd); err != nil {
				return err
			}
			switch {
			case cmd.Flags().Changed("file"):
				return runFile(cmd.Context(), g, file)
			case cmd.Flags().Changed("gen"):
				return runGen(cmd.Context(), g, gen, cmd.Flags().Changed("rate"))
			default:
				return runOne(cmd.Context(), g, one)
			}
		},
	}
	f := root.Flags()
	f.StringVarP(&g.configPath, "config", "c", "", "YAML configuration file, shared with the dispatcher (default $SLUICE_CONFIG)")
	f.StringVar(&g.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&g.logFormat, "log-format", "text", "text or json")
	f.StringVar(&g.progress, "progress", "auto", "progress bar on stderr with --file and --gen: auto (when stderr is a terminal), always or never")
	f.IntVar(&g.batch, "batch", 500, fmt.Sprintf("jobs per enqueue call with --file and --gen (1-%d)", maxBatch))
	for _, fk := range flagKeys {
		g.overrides[fk.key] = f.String(fk.flag, "", fk.usage)
	}
	one.register(f)
	file.register(f)
	gen.register(f)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.MarkFlagsMutuallyExclusive("payload", "file", "gen")
	root.MarkFlagsOneRequired("payload", "file", "gen")
	return root
}

// modeFlags are the flags that belong to one mode only.
var modeFlags = []struct {
	mode  string
	flags []string
}{
	{"payload", []string{"id", "user", "lane", "key", "not-before", "ttl", "cost"}},
	{"file", []string{"strict"}},
	{"gen", []string{"rate", "mix", "burst"}},
}

// checkFlags refuses flags of another mode than the one chosen, and
// impossible values of the shared flags.
func (g *globals) checkFlags(cmd *cobra.Command) error {
	fs := cmd.Flags()
	for _, m := range modeFlags {
		if fs.Changed(m.mode) {
			continue
		}
		for _, name := range m.flags {
			if fs.Changed(name) {
				return usageErrorf("--%s: only with --%s", name, m.mode)
			}
		}
	}
	if fs.Changed("batch") && fs.Changed("payload") {
		return usageErrorf("--batch: only with --file or --gen")
	}
	if g.batch < 1 || g.batch > maxBatch {
		return usageErrorf("--batch: must be between 1 and %d, got %d", maxBatch, g.batch)
	}
	switch g.progress {
	case "auto", "always", "never":
	default:
		return usageErrorf("--progress: must be auto, always or never, got %q", g.progress)
	}
	return nil
}

// load reads the configuration: file, environment, then the flags given.
func (g *globals) load() (*config.Config, error) {
	flags := map[string]string{}
	for key, v := range g.overrides {
		if *v != "" {
			flags[key] = *v
		}
	}
	path := g.configPath
	if path == "" {
		path = os.Getenv(config.EnvConfigFile)
	}
	cfg, err := config.LoadProducer(path, os.Environ(), flags)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return cfg, nil
}

// logger builds the logger the flags ask for.
func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, usageErrorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch g.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(g.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, opts)), nil
	}
	return nil, usageErrorf("--log-format: must be text or json, got %q", g.logFormat)
}
