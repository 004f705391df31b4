package e2e_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"text/tabwriter"
)

// TestBenchTableExact prints the provider-side tables of `make bench` (its
// name matches the target's -run TestBenchTable): what the provider sees at
// cap 500/s from four replicas on each backend, with the replicas' send
// lateness and forfeited slots; and the headroom trade-off on Redis. Only
// with SLUICE_BENCH=1.
func TestBenchTableExact(t *testing.T) {
	if os.Getenv("SLUICE_BENCH") == "" {
		t.Skip("set SLUICE_BENCH=1 (make bench) to run the end-to-end benchmark")
	}
	const rate, jobs = 500.0, 5000
	var exact [][]string
	for _, backend := range []string{"redis", "nats"} {
		runtime.GC()
		r := benchExactRun(t, backend, rate, jobs, nil)
		exact = append(exact, []string{backend, fmt.Sprint(r.s.Max1s), fmt.Sprint(r.s.Max100ms),
			fmt.Sprintf("%.3f", r.s.Mean/rate), r.m.latenessText(), r.m.forfeitText()})
	}
	var trade [][]string
	for _, h := range []string{"-1", "0.01", "0.02", "0.03"} {
		runtime.GC()
		r := benchExactRun(t, "redis", rate, jobs, []string{"SLUICE_PACER_HEADROOM=" + h})
		label := h
		if h == "-1" {
			label = "-1 (none)"
		}
		trade = append(trade, []string{label, fmt.Sprintf("%.3f", r.s.Mean/rate), fmt.Sprint(r.s.Max1s),
			fmt.Sprint(r.s.Max100ms), r.m.forfeitText()})
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\nat the provider: cap 500/s, %d replicas, %d-job backlog (bounds: 1s ≤ 501, 100ms ≤ 51; mean over first+0.5s … last−0.5s)\n", benchReplicas, jobs)
	fmt.Fprintln(w, "backend\tbusiest 1s\tbusiest 100ms\tmean/cap\tlateness p50 / p99 / max\tforfeited slots")
	for _, r := range exact {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	fmt.Fprintf(w, "\nheadroom trade-off: SLUICE_PACER_HEADROOM, cap 500/s, %d replicas, Redis\n", benchReplicas)
	fmt.Fprintln(w, "headroom\tmean/cap\tbusiest 1s\tbusiest 100ms\tforfeited slots")
	for _, r := range trade {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
	fmt.Println("\nlateness: quantiles estimated from the replicas' sluice_send_lateness_seconds buckets (max: the highest bucket used); n/a where a replica does not expose it")
}

// exactResult is one provider-side run.
type exactResult struct {
	s windowStats
	m metricSet
}

// benchExactRun drains jobs at rate with four replicas and returns what the
// provider saw and the replicas' metrics, scraped before they stop.
func benchExactRun(t *testing.T, backend string, rate float64, jobs int, env []string) exactResult {
	var r exactResult
	t.Run(fmt.Sprintf("exact-%s-%s", backend, strings.Join(env, ",")), func(t *testing.T) {
		c := newCluster(t, backend, rate, env...)
		c.enqueue("x", "bob", jobs)
		c.start(benchReplicas)
		c.waitDelivered(jobs, drainTime(jobs, rate))
		r.s = statsOf(arrivalTimes(c.prov.Arrivals()))
		m, err := scrapeAll(c)
		if err != nil {
			t.Fatal(err)
		}
		r.m = m
	})
	return r
}
