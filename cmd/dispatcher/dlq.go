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
	"github.com/sluicehq/sluice/internal/console"
)

func dlqCmd(g *globals) *cobra.Command {
	dlq := &cobra.Command{Use: "dlq", Short: "List, show, requeue, delete or purge dead letters"}
	dlq.AddCommand(dlqListCmd(g), dlqShowCmd(g), dlqRequeueCmd(g), dlqDeleteCmd(g), dlqPurgeCmd(g))
	return dlq
}

func dlqListCmd(g *globals) *cobra.Command {
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use: "list", Short: "List dead letters, oldest first (the reason cut to a line; dlq show ID for all of it)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return cli.Usagef("--limit: must be at least 1, got %d", limit)
			}
			return g.admin(cmd.Context(), true, func(ctx context.Context, a *adminParts) error {
				q, err := a.queue()
				if err != nil {
					return err
				}
				dead, err := q.ListDead(ctx, limit)
				if err != nil {
					return err
				}
				now := time.Now()
				views := make([]console.DeadLetter, 0, len(dead))
				for _, d := range dead {
					views = append(views, console.ViewDead(d, now, false))
				}
				if asJSON {
					return g.printJSON(views)
				}
				w := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tLANE\tATTEMPTS\tAT\tREASON")
				for _, d := range views {
					reason := oneLine(d.Reason)
					if d.Expired {
						reason = "[expired] " + reason
					}
					fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", d.ID, d.Lane, d.Attempt, d.At.UTC().Format(time.RFC3339), reason)
				}
				return w.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "most dead letters to list")
	jsonFlag(cmd, &asJSON)
	return cmd
}

func dlqShowCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "show ID", Short: "Show one dead letter: the provider's whole answer and the payload", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.admin(cmd.Context(), true, func(ctx context.Context, a *adminParts) error {
				q, err := a.queue()
				if err != nil {
					return err
				}
				d, err := console.FindDead(ctx, q, args[0])
				if err != nil {
					return err
				}
				v := console.ViewDead(d, time.Now(), true)
				if asJSON {
					return g.printJSON(v)
				}
				w := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintf(w, "id\t%s\nlane\t%s\n", v.ID, v.Lane)
				if v.User != "" {
					fmt.Fprintf(w, "user\t%s\n", v.User)
				}
				if v.Key != "" {
					fmt.Fprintf(w, "key\t%s\n", v.Key)
				}
				fmt.Fprintf(w, "attempts\t%d\ndead since\t%s\n", v.Attempt, v.At.UTC().Format(time.RFC3339))
				if !v.EnqueuedAt.IsZero() {
					fmt.Fprintf(w, "enqueued\t%s\n", v.EnqueuedAt.UTC().Format(time.RFC3339))
				}
				if !v.ExpiresAt.IsZero() {
					fmt.Fprintf(w, "expires\t%s (expired: %t)\n", v.ExpiresAt.UTC().Format(time.RFC3339), v.Expired)
				}
				if err := w.Flush(); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "reason:\n%s\npayload (%d bytes):\n%s\n", indent(v.Reason), v.PayloadBytes, indent(string(v.Payload)))
				return nil
			})
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

// idsArgs checks the arguments of a command that takes ids or --all.
func idsArgs(name string, all *bool) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if *all == (len(args) > 0) {
			return cli.Usagef("dlq %s: give job ids, or --all alone", name)
		}
		return nil
	}
}

// bulkContext is the context of a command that works through many dead
// letters: cmdCtx (the command's, which Ctrl-C ends) without the admin
// commands' adminTimeout, for a deadline that does not scale with the work
// would cut it off halfway; limited to timeout when that is above 0.
func bulkContext(cmdCtx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(cmdCtx, timeout)
	}
	return context.WithCancel(cmdCtx)
}

// timeoutFlag adds --timeout to a command that works through dead letters.
func timeoutFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "timeout", 0, "give up after this long (0: no limit; Ctrl-C stops it at any time)")
}

func dlqRequeueCmd(g *globals) *cobra.Command {
	var all, asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use: "requeue ID... | requeue --all", Short: "Put dead letters back into their lanes (expired jobs stay: they would die again at once)",
		Args: idsArgs("requeue", &all),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.admin(cmd.Context(), true, func(_ context.Context, a *adminParts) error {
				q, err := a.queue()
				if err != nil {
					return err
				}
				ctx, cancel := bulkContext(cmd.Context(), timeout)
				defer cancel()
				res, err := console.Requeue(ctx, q, time.Now(), args)
				g.audit("requeue", fmt.Sprintf("%s: requeued %d", idsDetail(args), res.Requeued), err)
				if asJSON {
					if jerr := g.printJSON(res); jerr != nil {
						return jerr
					}
				} else {
					fmt.Fprintf(g.stdout, "requeued %d\n", res.Requeued)
					if n := len(res.SkippedExpired); n > 0 {
						fmt.Fprintf(g.stdout, "left %d expired (past expires_at: requeued, they would be dead-lettered again at once): %s\n",
							n, strings.Join(res.SkippedExpired, " "))
					}
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "requeue every dead letter whose job has not expired")
	jsonFlag(cmd, &asJSON)
	timeoutFlag(cmd, &timeout)
	return cmd
}

func dlqDeleteCmd(g *globals) *cobra.Command {
	var all bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use: "delete ID... | delete --all", Short: "Delete dead letters for good",
		Args: idsArgs("delete", &all),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.deleteDead(cmd.Context(), "delete", args, timeout)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "delete every dead letter (as dlq purge)")
	timeoutFlag(cmd, &timeout)
	return cmd
}

func dlqPurgeCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use: "purge", Short: "Delete every dead letter for good", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.deleteDead(cmd.Context(), "purge", nil, timeout)
		},
	}
	timeoutFlag(cmd, &timeout)
	return cmd
}

// deleteDead deletes the dead letters of ids (all when none) and prints
// how many of how many it deleted, also when it stopped on an error.
func (g *globals) deleteDead(cmdCtx context.Context, action string, ids []string, timeout time.Duration) error {
	return g.admin(cmdCtx, true, func(actx context.Context, a *adminParts) error {
		q, err := a.queue()
		if err != nil {
			return err
		}
		total := int64(len(ids)) // how many there are to delete; -1 unknown
		if len(ids) == 0 {
			total = -1
			if st, err := q.Stats(actx); err == nil {
				total = st.DeadLetters
			}
		}
		ctx, cancel := bulkContext(cmdCtx, timeout)
		defer cancel()
		n, err := console.DeleteDead(ctx, q, ids)
		done := "deleted " + strconv.Itoa(n)
		if total >= 0 {
			// Dead letters that came during a purge are deleted too.
			done += " of " + strconv.FormatInt(max(total, int64(n)), 10)
		}
		g.audit(action, idsDetail(ids)+": "+done, err)
		fmt.Fprintln(g.stdout, done)
		return err
	})
}

func idsDetail(ids []string) string {
	if len(ids) == 0 {
		return "all"
	}
	return strings.Join(ids, ",")
}

func jobCmd(g *globals) *cobra.Command {
	job := &cobra.Command{Use: "job", Short: "Find a job"}
	var asJSON bool
	show := &cobra.Command{
		Use: "show ID", Short: "Show where a job is (waiting, delayed, in flight, dead, unknown), its attempts, last error and next attempt",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.admin(cmd.Context(), true, func(ctx context.Context, a *adminParts) error {
				q, err := a.queue()
				if err != nil {
					return err
				}
				loc, err := console.Locate(ctx, q, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return g.printJSON(loc)
				}
				w := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintf(w, "id\t%s\nstate\t%s\nlane\t%s\nattempts\t%d\n", loc.ID, loc.State, loc.Lane, loc.Attempt)
				if loc.LastError != "" {
					fmt.Fprintf(w, "last error\t%s\n", oneLine(loc.LastError))
				}
				if !loc.NextAttempt.IsZero() {
					fmt.Fprintf(w, "next attempt\t%s\n", loc.NextAttempt.UTC().Format(time.RFC3339))
				}
				return w.Flush()
			})
		},
	}
	jsonFlag(show, &asJSON)
	job.AddCommand(show)
	return job
}
