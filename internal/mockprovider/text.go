package mockprovider

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the report as a human-readable table.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	p("arrivals\t%d\tdelivered %d\tduplicates %d (%d jobs)\tdropped %d",
		r.Count, r.Delivered, r.Duplicates, r.DuplicateJobs, r.Dropped)
	if r.Count > 0 {
		p("span\t%s\tfrom %s\tto %s", round(r.Span),
			r.First.Format(time.RFC3339Nano), r.Last.Format(time.RFC3339Nano))
	}
	p("statuses\t%s", statuses(r.Statuses))
	if r.Cap > 0 {
		p("mean rate\t%.1f/s\tdelivered %.1f/s\tcap %g/s\tmean/cap %.3f",
			r.MeanRate, r.DeliveredRate, r.Cap, r.MeanOverCap)
		p("max in 1s\t%d\tcap %g", r.Max1s, r.Cap)
		p("max in 100ms\t%d\tcap %g", r.Max100ms, r.Cap/10)
	} else {
		p("mean rate\t%.1f/s\tdelivered %.1f/s", r.MeanRate, r.DeliveredRate)
		p("max in 1s\t%d", r.Max1s)
		p("max in 100ms\t%d", r.Max100ms)
	}
	p("inter-arrival\tp50 %s\tp99 %s", round(r.InterArrivalP50), round(r.InterArrivalP99))
	if len(r.Lanes) > 0 {
		p("")
		p("lane\tcount\tdelivered\tlatency p50\tlatency p99\tlatency max")
		for _, l := range r.Lanes {
			name := l.Lane
			if name == "" {
				name = "(none)"
			}
			if l.LatencyCount == 0 {
				p("%s\t%d\t%d\t-\t-\t-", name, l.Count, l.Delivered)
				continue
			}
			p("%s\t%d\t%d\t%s\t%s\t%s", name, l.Count, l.Delivered,
				round(l.LatencyP50), round(l.LatencyP99), round(l.LatencyMax))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("mockprovider: write report: %w", err)
	}
	return nil
}

// String returns the report as WriteText writes it.
func (r Report) String() string {
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}

// statuses renders {200: 5, 429: 1} as "200: 5  429: 1".
func statuses(m map[int]int) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for _, s := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d: %d", s, m[s]))
	}
	return strings.Join(parts, "  ")
}

// round shortens a duration for display: microseconds below 10ms, else
// 0.1 ms.
func round(d time.Duration) time.Duration {
	if d < 10*time.Millisecond && d > -10*time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}
