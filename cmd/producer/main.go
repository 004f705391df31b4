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
//
// SIGINT or SIGTERM stops the command: --file and --gen finish the batch
// in flight (for at most 10 s), --file also enqueues the jobs it has
// parsed, and the count printed is the count stored; exit code 1. A second
// signal exits at once, with 128 and the signal's number (130 for SIGINT,
// 143 for SIGTERM), without waiting for the batch in flight or printing a
// count.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/config"
)

func main() {
	redis.SetLogger(cli.QuietRedis{}) // go-redis' own dial retries show as the enqueue's error
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go onSignals(sigs, cancel, os.Stderr, os.Exit)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	signal.Stop(sigs)
	os.Exit(code)
}

// onSignals is cli.OnSignals with the producer's words: a second signal
// does not wait for the batch in flight.
func onSignals(sigs <-chan os.Signal, cancel context.CancelFunc, stderr io.Writer, exit func(code int)) {
	cli.OnSignals(sigs, cancel, stderr, exit, "producer: exiting without waiting for the batch in flight (some of its jobs may be stored)")
}

// usageErrorf is a bad-usage error: exit code 2.
func usageErrorf(format string, args ...any) error { return cli.Usagef(format, args...) }

// failure is a run-time failure: exit code 1.
func failure(err error) error { return cli.Failure(err) }

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
	return cli.ExitCode(err) // cobra's own errors (unknown, missing or conflicting flags) are usage
}

// globals are the flags every mode shares, and the standard streams.
type globals struct {
	cli.Flags
	progress string
	batch    int
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
}

// flagKeys are the configuration keys that have a flag of their own.
var flagKeys = []cli.Key{
	{Flag: "backend", Key: "queue.backend", Usage: "queue backend: redis or nats (queue.backend)"},
	{Flag: "queue", Key: "queue.name", Usage: "logical queue name (queue.name)"},
	{Flag: "redis-url", Key: "redis.url", Usage: "Redis URL, with backend redis (redis.url)"},
	{Flag: "nats-url", Key: "nats.url", Usage: "NATS URL, with backend nats (nats.url)"},
}

// maxBatch bounds --batch.
const maxBatch = 10_000

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
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
			"Exit codes: 0 all enqueued, 1 some job refused or a backend error, 2 bad usage or configuration.\n" +
			"SIGINT or SIGTERM stops the reading: what was read is enqueued and the count stored printed (exit 1).\n" +
			"A second signal exits at once (130 for SIGINT, 143 for SIGTERM), without waiting for the batch in flight.",
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
	g.Register(f, flagKeys)
	f.StringVar(&g.progress, "progress", "auto", "progress bar on stderr with --file and --gen: auto (when stderr is a terminal), always or never")
	f.IntVar(&g.batch, "batch", 500, fmt.Sprintf("jobs per enqueue call with --file and --gen (1-%d)", maxBatch))
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

// load reads the configuration: file (--config, else $SLUICE_CONFIG),
// environment, then the flags given.
func (g *globals) load() (*config.Config, error) {
	cfg, err := config.LoadProducer(g.Path(), os.Environ(), g.Overrides())
	if err != nil {
		return nil, cli.Usage(err)
	}
	return cfg, nil
}

// logger builds the logger the flags ask for, writing to stderr.
func (g *globals) logger() (*slog.Logger, error) { return g.Logger(g.stderr) }
