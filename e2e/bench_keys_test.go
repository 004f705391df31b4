package e2e_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// TestBenchTableKeys prints how far one queue and one pacer key go on one
// Redis shard (`make bench`): for 4 and 16 replicas draining a backlog at
// cap 500/s, the Redis commands per job (queue and pacer) and per second,
// the script calls per job (and of them the pacer's calls for slots and its
// reports of the provider's answers, from the replicas' metrics), the
// Redis CPU per job, and the ceiling that
// makes: one core's worth of Redis CPU divided by the CPU per job; and
// what the provider saw. 64 replicas on two cores are there to show what
// so many processes on one small machine do to the bounds. Only with
// SLUICE_BENCH=1.
func TestBenchTableKeys(t *testing.T) {
	if os.Getenv("SLUICE_BENCH") == "" {
		t.Skip("set SLUICE_BENCH=1 (make bench) to run the end-to-end benchmark")
	}
	const rate, jobs = 500.0, 5000
	var rows [][]string
	for _, n := range []int{4, 16, 64} {
		t.Run(fmt.Sprintf("replicas=%d", n), func(t *testing.T) {
			c := newCluster(t, "redis", rate)
			c.enqueue("k", "bob", jobs)
			before, from := redisInfo(t, c), time.Now()
			var env []string
			if n > 4 {
				env = []string{"GOMAXPROCS=1"}
			}
			c.startWith(n, env)
			c.waitDelivered(jobs, drainTime(jobs, rate))
			after, took := redisInfo(t, c), time.Since(from)
			m, err := scrapeAll(c)
			if err != nil {
				t.Fatal(err)
			}
			s := statsOf(arrivalTimes(c.prov.Arrivals()))
			cmds := (after["total_commands_processed"] - before["total_commands_processed"]) / jobs
			evals := (after["evalsha_calls"] - before["evalsha_calls"]) / jobs
			cpu := (after["used_cpu_sys"] + after["used_cpu_user"] - before["used_cpu_sys"] - before["used_cpu_user"]) / jobs
			ceiling := "n/a"
			if cpu > 0 {
				ceiling = fmt.Sprintf("%.0f", 1/cpu)
			}
			perSec := (after["total_commands_processed"] - before["total_commands_processed"]) / took.Seconds()
			rows = append(rows, []string{fmt.Sprint(n), fmt.Sprintf("%.2f", cmds), fmt.Sprintf("%.0f", perSec), fmt.Sprintf("%.2f", evals),
				fmt.Sprintf("%.2f / %.2f", m.calls/jobs, m.reports/jobs),
				fmt.Sprintf("%.0fµs", cpu*1e6), ceiling, fmt.Sprint(s.Max1s), fmt.Sprint(s.Max100ms), fmt.Sprintf("%.3f", s.Mean/rate)})
		})
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\none queue and one pacer key on one Redis shard: cap 500/s, %d-job backlog, Redis backend, more than 4 replicas with GOMAXPROCS=1 (bounds: 1s ≤ 501, 100ms ≤ 51, mean ≥ 0.970)\n", jobs)
	fmt.Fprintln(w, "replicas\tRedis commands/job\tRedis commands/s\tscript calls/job\tof which reserve / report\tRedis CPU/job\tceiling jobs/s (1 core)\tbusiest 1s\tbusiest 100ms\tmean/cap")
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
}

// redisInfo reads the counters of the cluster's Redis that the table
// needs: total_commands_processed, evalsha_calls, used_cpu_sys and
// used_cpu_user (seconds).
func redisInfo(t *testing.T, c *cluster) map[string]float64 {
	t.Helper()
	txt, err := c.redis.Client().Info(context.Background(), "stats", "cpu", "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(txt, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "total_commands_processed", "used_cpu_sys", "used_cpu_user":
			out[k], _ = strconv.ParseFloat(v, 64)
		case "cmdstat_evalsha":
			for f := range strings.SplitSeq(v, ",") {
				if n, ok := strings.CutPrefix(f, "calls="); ok {
					out["evalsha_calls"], _ = strconv.ParseFloat(n, 64)
				}
			}
		}
	}
	return out
}
