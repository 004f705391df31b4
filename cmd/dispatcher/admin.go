package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/backend"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/console"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
)

// adminTimeout bounds one admin command's work, once its queue is open.
const adminTimeout = 10 * time.Second

// queueOpenTimeout bounds the opening of the queue, apart from the
// command's work: unreachable NATS servers cost at most this long, and the
// pacer's state and the replicas in Redis are still read.
const queueOpenTimeout = 5 * time.Second

// adminParts are what the admin commands act on: the pacer's controls and
// live replicas in Redis, and the queue when the command needs it. A part
// that cannot be opened carries its error, so that a command shows what it
// can when one backend is down.
type adminParts struct {
	cfg      *config.Config
	controls *pacer.Controls
	members  *pacer.Members
	q        queue.Queue
	qErr     error
	closers  []func() error
	// lanesUnknown is set when queue.lanes came from neither a file nor
	// the environment: the lanes shown are the default, not the
	// dispatchers'.
	lanesUnknown bool
}

// envLanes is the variable that sets queue.lanes.
const envLanes = "SLUICE_QUEUE_LANES"

func (a *adminParts) close() {
	for _, c := range a.closers {
		_ = c()
	}
}

// sources returns what console.Collect reads.
func (a *adminParts) sources() console.Sources {
	src := console.Sources{Queue: a.cfg.Queue.Name, Backend: string(a.cfg.Queue.Backend), Controls: a.controls,
		Members: a.members, StatsErr: a.qErr, ConfiguredRate: a.cfg.Pacer.Rate, ConfiguredBurst: a.cfg.Pacer.Burst}
	if a.q != nil {
		src.Stats = a.q
	}
	return src
}

// queue returns the queue, or the error that kept it from opening.
func (a *adminParts) queue() (queue.Queue, error) {
	if a.q == nil {
		return nil, fmt.Errorf("queue unreachable: %w", a.qErr)
	}
	return a.q, nil
}

// admin loads the configuration the admin commands need (LoadAdmin: no
// pacer.rate, no sink.url), opens Redis and, when withQueue, the queue,
// within queueOpenTimeout, and runs fn within adminTimeout.
func (g *globals) admin(ctx context.Context, withQueue bool, fn func(context.Context, *adminParts) error) error {
	cfg, err := config.LoadAdmin(g.Path(), os.Environ(), g.Overrides())
	if err != nil {
		return cli.Usage(err)
	}
	log, err := g.logger()
	if err != nil {
		return err
	}
	redis.SetLogger(cli.QuietRedis{}) // go-redis' own dial retries are reported by sluice
	a := &adminParts{cfg: cfg, lanesUnknown: g.Path() == "" && os.Getenv(envLanes) == ""}
	defer a.close()
	rdb, err := cfg.RedisClient()
	if err != nil {
		return cli.Failure(fmt.Errorf("redis: %w", err))
	}
	a.closers = append(a.closers, rdb.Close)
	if a.controls, err = pacer.NewControls(rdb, cfg.Pacer.Name); err != nil {
		return cli.Failure(err)
	}
	if a.members, err = pacer.NewMembers(rdb, cfg.Pacer.Name); err != nil {
		return cli.Failure(err)
	}
	if withQueue {
		host, _ := os.Hostname()
		// Without the dispatchers' file, queue.lanes may not be their
		// lanes: a requeue then never moves a job to another lane.
		octx, ocancel := context.WithTimeout(ctx, queueOpenTimeout)
		q, closeQ, err := backend.Open(octx, cfg, backend.Options{Consumer: host + "-" + strconv.Itoa(os.Getpid()), Redis: rdb, Log: log,
			Attach: true, KeepLanes: g.Path() == ""})
		ocancel()
		if err != nil {
			a.qErr = err
		} else {
			a.q = q
			a.closers = append([]func() error{closeQ}, a.closers...)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	if err := fn(ctx, a); err != nil {
		return cli.Failure(err)
	}
	return nil
}

// audit logs an operator's action taken from the command line; the
// replicas log it again when they see it take effect.
func (g *globals) audit(action, detail string, err error) {
	log, lerr := g.logger()
	if lerr != nil {
		return
	}
	result := "done"
	if err != nil {
		result = "failed: " + err.Error()
	}
	log.Info("sluice: audit", "via", "cli", "action", action, "detail", detail, "result", result)
}

// jsonFlag adds --json to a read command.
func jsonFlag(cmd *cobra.Command, on *bool) {
	cmd.Flags().BoolVar(on, "json", false, "print JSON instead of a table")
}

func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func statusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show lanes, dead letters, the configured and effective rate, and live replicas",
		Long: "status shows the queue's lanes, the pacer's state and the live replicas. It needs only\n" +
			"queue.name, queue.backend and the servers' addresses; when Redis or the queue's backend\n" +
			"is down it shows the rest, names what it could not read, and exits 1.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.admin(cmd.Context(), true, func(ctx context.Context, a *adminParts) error {
				s := console.Collect(ctx, a.sources())
				s.LanesAssumed = a.lanesUnknown
				var err error
				if asJSON {
					err = g.printJSON(s)
				} else {
					err = printStatus(g, a.cfg, s, a.lanesUnknown)
				}
				return errors.Join(err, snapshotErr(s))
			})
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

// snapshotErr is the error of the parts a snapshot could not read.
func snapshotErr(s console.Snapshot) error {
	var errs []error
	if s.QueueError != "" {
		errs = append(errs, fmt.Errorf("queue unreachable: %s", s.QueueError))
	}
	if s.PacerError != "" {
		errs = append(errs, fmt.Errorf("pacer unreachable: %s", s.PacerError))
	} else if s.ReplicasError != "" {
		errs = append(errs, fmt.Errorf("replicas unreadable: %s", s.ReplicasError))
	}
	return errors.Join(errs...)
}

func setRateCmd(g *globals) *cobra.Command {
	var clear bool
	var burst int
	var tenant string
	var rate float64
	cmd := &cobra.Command{
		Use:   "set-rate RATE [--burst N] | set-rate --clear | set-rate --tenant NAME RATE | set-rate --tenant NAME --clear",
		Short: "Override the rate (and burst) for every replica at once, or clear the override",
		Args: func(cmd *cobra.Command, args []string) error {
			var err error
			rate, err = setRateArgs(cmd, args, clear, burst, tenant)
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("tenant") {
				return setTenantRate(cmd.Context(), g, tenant, rate, clear)
			}
			return g.admin(cmd.Context(), false, func(ctx context.Context, a *adminParts) error {
				c := a.controls
				if clear {
					err := c.ClearOverrides(ctx)
					g.audit("set rate", "clear", err)
					if err != nil {
						return err
					}
					fmt.Fprintf(g.stdout, "override cleared: every replica is back to pacer.rate%s\n", configuredNote(a.cfg))
					return nil
				}
				var err error
				detail := fmt.Sprintf("%g/s", rate)
				if cmd.Flags().Changed("burst") {
					err = c.SetRateBurst(ctx, rate, burst)
					detail += fmt.Sprintf(" burst %d", burst)
				} else {
					err = c.SetRate(ctx, rate)
				}
				g.audit("set rate", detail, err)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "rate override %s set for every replica%s\n", detail, configuredNote(a.cfg))
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the override: back to pacer.rate")
	cmd.Flags().IntVar(&burst, "burst", 0, fmt.Sprintf("also override the burst, 1 to %d (set with the rate in one write)", pacer.MaxBurst))
	cmd.Flags().StringVar(&tenant, "tenant", "", "override one tenant's rate (pacer.tenants) instead; with --clear, remove it (\"\" for every tenant's)")
	return cmd
}

// setRateArgs checks set-rate's arguments and flags before anything is
// written, and returns the rate (0 with --clear). Every mistake is a usage
// error naming the flag or argument.
func setRateArgs(cmd *cobra.Command, args []string, clear bool, burst int, tenant string) (float64, error) {
	withBurst, withTenant := cmd.Flags().Changed("burst"), cmd.Flags().Changed("tenant")
	switch {
	case clear == (len(args) > 0), len(args) > 1:
		return 0, cli.Usagef("set-rate: give a RATE, or --clear alone")
	case withBurst && clear:
		return 0, cli.Usagef("set-rate: --burst sets an override; it cannot go with --clear, which clears the rate and burst overrides")
	case withBurst && withTenant:
		return 0, cli.Usagef("set-rate: --burst cannot go with --tenant: a tenant's override is a rate only")
	case withBurst && pacer.CheckBurst(burst) != nil:
		return 0, cli.Usagef("set-rate: --burst must be between 1 and %d, got %d", pacer.MaxBurst, burst)
	case withTenant && tenant == "" && !clear:
		return 0, cli.Usagef("set-rate: --tenant: give the tenant's name (--tenant \"\" goes only with --clear, for every tenant)")
	case clear:
		return 0, nil
	}
	rate, err := strconv.ParseFloat(args[0], 64)
	if err != nil || pacer.CheckRate(rate) != nil {
		return 0, cli.Usagef("set-rate: RATE must be a positive number of requests/s, from %g to %d, got %q", pacer.MinRate, int(pacer.MaxRate), args[0])
	}
	return rate, nil
}

// configuredNote names the configured rate when this configuration has one.
func configuredNote(cfg *config.Config) string {
	if cfg.Pacer.Rate > 0 {
		return fmt.Sprintf(" (configured %g/s)", cfg.Pacer.Rate)
	}
	return ""
}

func pauseCmd(g *globals, pause bool) *cobra.Command {
	use, short, done := "resume", "Resume a paused schedule", "resumed"
	if pause {
		use, short, done = "pause", "Pause the schedule: no replica sends until resume", "paused"
	}
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.admin(cmd.Context(), false, func(ctx context.Context, a *adminParts) error {
				var err error
				if pause {
					err = a.controls.Pause(ctx)
				} else {
					err = a.controls.Resume(ctx)
				}
				g.audit(use, "", err)
				if err == nil {
					fmt.Fprintf(g.stdout, "%s: queue %s\n", done, a.cfg.Queue.Name)
				}
				return err
			})
		},
	}
}

func configCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "config", Short: "Print the effective configuration (secrets hidden) and exit", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			fmt.Fprint(g.stdout, cfg.Redacted())
			return nil
		},
	}
}
