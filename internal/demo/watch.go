package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// watch prints a line a second until every job was delivered or ctx ends.
func (e *env) watch(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: stopped before every job was delivered: %w", ctx.Err())
		case now := <-t.C:
			delivered := e.line(ctx, now)
			if delivered >= e.o.Jobs {
				return nil
			}
		}
	}
}

// line prints the live view for the second before now and returns how
// many distinct jobs were delivered so far (a job delivered twice counts
// once, so that the demo does not end before every job has arrived).
func (e *env) line(ctx context.Context, now time.Time) int {
	all := e.prov.Arrivals()
	last := mockprovider.Between(all, now.Add(-time.Second), now)
	_, delivered := e.prov.Counts()
	var b strings.Builder
	fmt.Fprintf(&b, "%5.1fs  provider %3d/s  sent %4d/%d", now.Sub(e.start).Seconds(), len(last), delivered, e.o.Jobs)
	st, err := e.parts[0].Queue.Stats(ctx)
	for _, l := range st.Lanes {
		fmt.Fprintf(&b, "  │ %-7s waiting %4d  wait p50 %s", l.Lane, l.Ready+l.Delayed+l.InFlight, waitP50(last, l.Lane))
	}
	if err != nil {
		fmt.Fprintf(&b, "  (queue: %v)", err)
	}
	fmt.Fprintln(e.o.Out, b.String())
	return delivered
}

// waitP50 is the median enqueue-to-provider time of the lane's arrivals.
func waitP50(arrivals []mockprovider.Arrival, lane string) string {
	var waits []time.Duration
	for _, a := range arrivals {
		if a.Lane == lane && !a.EnqueuedAt.IsZero() {
			waits = append(waits, a.At.Sub(a.EnqueuedAt))
		}
	}
	if len(waits) == 0 {
		return "     -"
	}
	slices.Sort(waits)
	return fmt.Sprintf("%5.1fs", mockprovider.Percentile(waits, 50).Seconds())
}

// finish prints the provider's report and writes the chart.
func (e *env) finish() (Result, error) {
	rep := e.prov.Report(time.Time{}, time.Time{})
	fmt.Fprintln(e.o.Out)
	if err := rep.WriteText(e.o.Out); err != nil {
		return Result{}, err
	}
	if err := e.prov.WriteChart(e.o.Chart); err != nil {
		return Result{}, fmt.Errorf("demo: chart: %w", err)
	}
	fmt.Fprintf(e.o.Out, "\nchart (requests per 100ms, cap drawn in): %s\n", e.o.Chart)
	return Result{Report: rep, Chart: e.o.Chart}, nil
}
