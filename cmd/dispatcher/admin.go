package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/cli"

	"github.com/sluicehq/sluice/internal/replica"
)

// admin runs fn on the opened queue and pacer, then closes them.
func (g *globals) admin(ctx context.Context, fn func(context.Context, *replica.Parts) error) error {
	p, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := fn(ctx, p); err != nil {
		return cli.Failure(err)
	}
	return nil
}

func statusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show lanes, dead letters, the configured and effective rate, and live replicas",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.admin(cmd.Context(), func(ctx context.Context, p *replica.Parts) error {
				return printStatus(ctx, g, p)
			})
		},
	}
}

func printStatus(ctx context.Context, g *globals, p *replica.Parts) error {
	qs, err := p.Queue.Stats(ctx)
	if err != nil {
		return err
	}
	st, err := p.Pacer.Controls().State(ctx)
	if err != nil {
		return err
	}
	reps, err := p.Pacer.Members().Replicas(ctx, replica.LiveWindow)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "queue %s (%s)\n\n", p.Config.Queue.Name, p.Config.Queue.Backend)
	fmt.Fprintln(w, "LANE\tREADY\tDELAYED\tIN FLIGHT\tOLDEST")
	for _, l := range qs.Lanes {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\n", l.Lane, l.Ready, l.Delayed, l.InFlight, l.OldestAge.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "\ndead letters\t%d\n", qs.DeadLetters)
	fmt.Fprintf(w, "rate\tconfigured %g/s, effective %g/s%s\n", st.ConfiguredRate, st.EffectiveRate, overrideNote(st.RateOverride))
	fmt.Fprintf(w, "burst\tconfigured %d, effective %d\n", st.ConfiguredBurst, st.EffectiveBurst)
	switch {
	case st.Paused:
		fmt.Fprintln(w, "schedule\tPAUSED (dispatcher resume)")
	case st.ThrottledUntil.After(st.Now):
		fmt.Fprintf(w, "schedule\tthrottled by the provider for %s more\n", st.ThrottledUntil.Sub(st.Now).Round(time.Millisecond))
	default:
		fmt.Fprintf(w, "schedule\trunning, %s ahead of now\n", st.Backlog.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "\nlive replicas\t%d\n", len(reps))
	for _, r := range reps {
		fmt.Fprintf(w, "  %s\t%s\tseen %s ago\n", r.ID, r.Report, st.Now.Sub(r.LastSeen).Round(time.Millisecond))
	}
	return w.Flush()
}

func overrideNote(o float64) string {
	if o > 0 {
		return " (override set with dispatcher set-rate; --clear removes it)"
	}
	return ""
}

func setRateCmd(g *globals) *cobra.Command {
	var clear bool
	var burst int
	cmd := &cobra.Command{
		Use:   "set-rate RATE | set-rate --clear",
		Short: "Override the rate (and burst) for every replica at once, or clear the override",
		Args: func(cmd *cobra.Command, args []string) error {
			if clear != (len(args) == 0) {
				return cli.Usagef("set-rate: give a RATE, or --clear alone")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var rate float64
			if !clear {
				var err error
				if rate, err = strconv.ParseFloat(args[0], 64); err != nil || rate <= 0 {
					return cli.Usagef("set-rate: RATE must be a positive number of requests/s, got %q", args[0])
				}
			}
			return g.admin(cmd.Context(), func(ctx context.Context, p *replica.Parts) error {
				if clear {
					if err := p.Pacer.Controls().ClearOverrides(ctx); err != nil {
						return err
					}
					fmt.Fprintf(g.stdout, "override cleared: every replica is back to pacer.rate %g/s\n", p.Config.Pacer.Rate)
					return nil
				}
				if err := p.Pacer.Controls().SetRate(ctx, rate); err != nil {
					return err
				}
				if burst > 0 {
					if err := p.Pacer.Controls().SetBurst(ctx, burst); err != nil {
						return err
					}
				}
				fmt.Fprintf(g.stdout, "rate override %g/s set for every replica (configured %g/s)\n", rate, p.Config.Pacer.Rate)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the override: back to pacer.rate")
	cmd.Flags().IntVar(&burst, "burst", 0, "also override the burst")
	return cmd
}

func pauseCmd(g *globals, pause bool) *cobra.Command {
	use, short, done := "resume", "Resume a paused schedule", "resumed"
	if pause {
		use, short, done = "pause", "Pause the schedule: no replica sends until resume", "paused"
	}
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.admin(cmd.Context(), func(ctx context.Context, p *replica.Parts) error {
				var err error
				if pause {
					err = p.Pacer.Controls().Pause(ctx)
				} else {
					err = p.Pacer.Controls().Resume(ctx)
				}
				if err == nil {
					fmt.Fprintf(g.stdout, "%s: queue %s\n", done, p.Config.Queue.Name)
				}
				return err
			})
		},
	}
}

func dlqCmd(g *globals) *cobra.Command {
	dlq := &cobra.Command{Use: "dlq", Short: "List or requeue dead letters"}
	var limit int
	list := &cobra.Command{
		Use: "list", Short: "List dead letters, oldest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.admin(cmd.Context(), func(ctx context.Context, p *replica.Parts) error {
				dead, err := p.Queue.ListDead(ctx, limit)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tLANE\tATTEMPTS\tAT\tREASON")
				for _, d := range dead {
					fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", d.Job.ID, d.Job.Lane, d.Job.Attempt, d.At.UTC().Format(time.RFC3339), oneLine(d.Reason))
				}
				return w.Flush()
			})
		},
	}
	list.Flags().IntVar(&limit, "limit", 100, "most dead letters to list")
	var all bool
	requeue := &cobra.Command{
		Use: "requeue ID... | requeue --all", Short: "Put dead letters back into their lanes",
		Args: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return cli.Usagef("dlq requeue: give job ids, or --all alone")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.admin(cmd.Context(), func(ctx context.Context, p *replica.Parts) error {
				n, err := p.Queue.Requeue(ctx, args...)
				fmt.Fprintf(g.stdout, "requeued %d\n", n)
				return err
			})
		},
	}
	requeue.Flags().BoolVar(&all, "all", false, "requeue every dead letter")
	dlq.AddCommand(list, requeue)
	return dlq
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

// oneLine keeps a reason on one line of at most 120 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
