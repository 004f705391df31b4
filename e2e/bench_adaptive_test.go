package e2e_test

import (
	"fmt"
	"os"
	"testing"
	"text/tabwriter"
	"time"
)

// TestBenchTableAdaptive prints the convergence table of `make bench`: a
// provider whose own capacity is 300/s under pacer.rate 400, then 400/s,
// three replicas, each backend. Only with SLUICE_BENCH=1.
func TestBenchTableAdaptive(t *testing.T) {
	if os.Getenv("SLUICE_BENCH") == "" {
		t.Skip("set SLUICE_BENCH=1 (make bench) to run the end-to-end benchmark")
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nthe provider's own capacity 300/s under pacer.rate 400, then 400/s; 3 replicas (pacer.adaptive defaults)")
	fmt.Fprintln(w, "backend\tsettled after\tdelivered/s at 300 (s 10-20)\t429 share (s 10-20)\tback at ≥ 380/s after")
	for _, backend := range []string{"redis", "nats"} {
		r := runCapacity(t, backend)
		fmt.Fprintf(w, "%s\t%s\t%.1f\t%.2f%%\t%s\n", backend, r.settle, r.steadyRate, r.steadyShare*100, r.climb)
	}
	fmt.Fprintln(w, "\n5% of requests answered 429 with Retry-After: 2, pacer.rate 400, 3 replicas, Redis, first 20 s")
	fmt.Fprintln(w, "pacer.adaptive.enabled\tdelivered/s\tof the cap")
	for _, on := range []string{"true", "false"} {
		got := deliveredFor(t, 400, 20*time.Second, "SLUICE_PACER_ADAPTIVE_ENABLED="+on)
		fmt.Fprintf(w, "%s\t%.1f\t%.2f\n", on, got, got/400)
	}
	_ = w.Flush()
	fmt.Println("settled: from then on every second delivered ≥ 270 with ≤ 5% answered 429")
}
