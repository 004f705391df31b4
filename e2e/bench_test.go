package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/queue"
)

// TestBenchTable runs the end-to-end scenarios of `make bench` with four
// dispatcher processes on real Redis and NATS and prints one table. It runs
// only with SLUICE_BENCH=1 (it takes a couple of minutes).
func TestBenchTable(t *testing.T) {
	if os.Getenv("SLUICE_BENCH") == "" {
		t.Skip("set SLUICE_BENCH=1 (make bench) to run the end-to-end benchmark")
	}
	// Each scenario runs on its own servers and processes. The light ones
	// run first and the harness collects its garbage in between, so that
	// the test process (which is also the provider) does not pause inside a
	// latency measurement for garbage left by the 30,000-job ceiling run.
	var rows [][]string
	for _, backend := range []string{"redis", "nats"} {
		byScenario := make([][]string, 4)
		for i, run := range []func(*testing.T, string) []string{benchLatency, benchPriority, benchPacing, benchCeiling} {
			runtime.GC()
			byScenario[[]int{2, 3, 0, 1}[i]] = run(t, backend)
		}
		rows = append(rows, byScenario...)
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nscenario\tbackend\tresult")
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
	host, _ := os.Hostname()
	fmt.Printf("\n4 dispatcher processes, one redis-server, embedded NATS, mock provider on loopback; %s, %d CPUs\n", host, runtime.NumCPU())
}

const benchReplicas = 4

// (1) pacing at cap 500/s from a 10,000-job backlog.
func benchPacing(t *testing.T, backend string) []string {
	const rate, jobs = 500.0, 10000
	var row []string
	t.Run("pacing-"+backend, func(t *testing.T) {
		c := newCluster(t, backend, rate)
		c.enqueue("p", "bob", jobs)
		c.start(benchReplicas)
		c.waitDelivered(jobs, 2*time.Minute)
		r := c.prov.Report(time.Time{}, time.Time{})
		row = []string{"(1) pacing, cap 500/s, 10,000 backlog", backend, fmt.Sprintf(
			"mean/cap %.3f · max 1s %d (cap 500) · max 100ms %d (cap 50) · inter-arrival p99 %s · duplicates %d",
			r.MeanOverCap, r.Max1s, r.Max100ms, r.InterArrivalP99.Round(10*time.Microsecond), r.Duplicates)}
	})
	return row
}

// (2) the ceiling with no cap: jobs/s through the whole path.
func benchCeiling(t *testing.T, backend string) []string {
	const jobs = 30000
	var row []string
	t.Run("ceiling-"+backend, func(t *testing.T) {
		c := newCluster(t, backend, 1e6, "SLUICE_PACER_BURST=1000")
		c.enqueue("c", "bob", jobs)
		c.start(benchReplicas)
		c.waitDelivered(jobs, 3*time.Minute)
		r := c.prov.Report(time.Time{}, time.Time{})
		row = []string{"(2) ceiling, no cap, 30,000 backlog", backend, fmt.Sprintf(
			"%.0f jobs/s through queue → pacer → HTTP → ack · duplicates %d", r.MeanRate, r.Duplicates)}
	})
	return row
}

// (3) latency under the cap: 200 jobs/s offered at cap 500.
func benchLatency(t *testing.T, backend string) []string {
	const rate, offered, warmup, jobs = 500.0, 200, 100, 1000
	var row []string
	t.Run("latency-"+backend, func(t *testing.T) {
		c := newCluster(t, backend, rate)
		c.start(benchReplicas)
		waitReady(t, c)
		tick := time.NewTicker(time.Second / offered)
		defer tick.Stop()
		// 100 warm-up jobs first (connections dialled, scripts loaded),
		// not measured; then 1,000 measured ones.
		for i := range warmup + jobs {
			<-tick.C
			id := fmt.Sprintf("l-%05d", i)
			if i < warmup {
				id = fmt.Sprintf("w-%05d", i)
			}
			j := &queue.Job{ID: id, Lane: "default", Payload: json.RawMessage(`{"text":"hi"}`)}
			if _, err := c.q.Enqueue(context.Background(), j); err != nil {
				t.Fatal(err)
			}
		}
		c.waitDelivered(warmup+jobs, time.Minute)
		var waits []time.Duration
		for _, a := range c.prov.Arrivals() {
			if strings.HasPrefix(a.JobID, "l-") {
				waits = append(waits, a.At.Sub(a.EnqueuedAt))
			}
		}
		slices.Sort(waits)
		row = []string{"(3) latency, 200/s offered at cap 500", backend, fmt.Sprintf(
			"enqueue → provider p50 %s · p99 %s · max %s",
			mockprovider.Percentile(waits, 50).Round(10*time.Microsecond),
			mockprovider.Percentile(waits, 99).Round(10*time.Microsecond), waits[len(waits)-1].Round(10*time.Microsecond))}
	})
	return row
}

// (4) priority: 100 privileged jobs into a 4,000-job backlog at cap 200.
func benchPriority(t *testing.T, backend string) []string {
	const rate = 200.0
	var row []string
	t.Run("priority-"+backend, func(t *testing.T) {
		c := newCluster(t, backend, rate)
		c.enqueue("b", "bob", 4000)
		c.start(benchReplicas)
		c.waitDelivered(200, time.Minute)
		enqueued := time.Now()
		c.enqueue("v", "alice", 100)
		eventually(t, time.Minute, "100 privileged jobs delivered", func() bool {
			n := 0
			for _, a := range c.prov.Arrivals() {
				if strings.HasPrefix(a.JobID, "v-") {
					n++
				}
			}
			return n >= 100
		})
		var waits []time.Duration
		var lastVIP time.Time
		for _, a := range c.prov.Arrivals() {
			if strings.HasPrefix(a.JobID, "v-") {
				waits = append(waits, a.At.Sub(a.EnqueuedAt))
				lastVIP = a.At
			}
		}
		overtook := len(mockprovider.Between(c.prov.Arrivals(), enqueued, lastVIP.Add(time.Nanosecond))) - len(waits)
		slices.Sort(waits)
		row = []string{"(4) priority, 100 privileged into 4,000 at cap 200", backend, fmt.Sprintf(
			"privileged wait p50 %s · p99 %s · backlog jobs that overtook them %d (100 take 0.5s at the cap)",
			mockprovider.Percentile(waits, 50).Round(time.Millisecond), mockprovider.Percentile(waits, 99).Round(time.Millisecond), overtook)}
	})
	return row
}

// waitReady waits until every replica announced itself.
func waitReady(t *testing.T, c *cluster) {
	eventually(t, 30*time.Second, "replicas listening", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.procs {
			if len(p.metric) == 0 {
				return false
			}
		}
		return true
	})
}
