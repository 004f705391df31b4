package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

// perfLoad offers 5,000 jobs/s for 3s under cap 20,000, counting the Redis
// commands (MONITOR), Redis reads and NATS messages per job delivered in
// that window; then 10,000 jobs/s for 3s, and returns the largest
// replica's peak RSS.
func perfLoad(t *testing.T, backend string) (f loadFigures) {
	t.Run("load-"+backend, func(t *testing.T) {
		c := newPerfCluster(t, backend, 20000)
		c.run(t)
		ctx := context.Background()
		sent := offer(t, c, "w", 1000, time.Second) // connections dialled, scripts loaded
		c.waitDelivered(sent, time.Minute)
		mon := monitor(t, c.redis.Addr())
		r0, err := redisReads(ctx, c.rdb)
		if err != nil {
			t.Fatal(err)
		}
		in0, out0 := c.natsMsgs()
		d0 := c.delivered()
		sent += offer(t, c, "a", 5000, 3*time.Second)
		c.waitDelivered(sent, time.Minute)
		r1, err := redisReads(ctx, c.rdb)
		if err != nil {
			t.Fatal(err)
		}
		in1, out1 := c.natsMsgs()
		mon.stop()
		jobs := float64(c.delivered() - d0)
		f.redisReads = float64(r1-r0) / jobs
		f.redisCmds = float64(mon.total.Load()) / jobs
		f.pacerCalls = float64(mon.pacer.Load()) / jobs
		f.natsIn, f.natsOut = float64(in1-in0)/jobs, float64(out1-out0)/jobs

		sent += offer(t, c, "b", 10000, 3*time.Second)
		c.waitDelivered(sent, time.Minute)
		for _, p := range c.allProcs() {
			hwm, err := hwmOf(p.cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			f.rssMB = max(f.rssMB, float64(hwm)/(1<<20))
		}
	})
	return f
}

// natsMsgs is the NATS server's message counts, zero on Redis.
func (c *perfCluster) natsMsgs() (in, out int64) {
	if c.nats == nil {
		return 0, 0
	}
	return c.nats.msgs()
}

// offer enqueues jobs at rate per second for d, in small batches as they
// fall due, and returns how many it enqueued.
func offer(t *testing.T, c *perfCluster, prefix string, rate float64, d time.Duration) int {
	t.Helper()
	return len(offerPaced(t, c.q, rate, d, func(i int) *queue.Job {
		return &queue.Job{ID: fmt.Sprintf("%s-%06d", prefix, i), Lane: "default", Payload: json.RawMessage(`{"text":"hi"}`)}
	}))
}

// offerPaced enqueues job(0), job(1), … on q at rate per second for d, in
// small batches as they fall due, and returns their IDs.
func offerPaced(t *testing.T, q queue.Queue, rate float64, d time.Duration, job func(i int) *queue.Job) []string {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var ids []string
	start := time.Now()
	for time.Since(start) < d {
		<-tick.C
		due := min(int(rate*time.Since(start).Seconds()), int(rate*d.Seconds()))
		if due <= len(ids) {
			continue
		}
		jobs := make([]*queue.Job, 0, due-len(ids))
		for i := len(ids); i < due; i++ {
			j := job(i)
			jobs = append(jobs, j)
			ids = append(ids, j.ID)
		}
		if _, err := q.Enqueue(context.Background(), jobs...); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// perfGrants returns grants/s of one script call per grant (the baseline)
// and of sluice's pacer, each with 4 clients × 8 callers for 2s on one
// Redis, at a rate neither reaches.
func perfGrants(t *testing.T) (baseline, sluice float64) {
	t.Run("grants", func(t *testing.T) {
		srv := testredis.Start(t, testredis.Options{})
		var err error
		runtime.GC()
		if baseline, err = grantsPerSecond(srv.Addr(), 4, 8, 2*time.Second, oneCallPerGrant); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		if sluice, err = grantsPerSecond(srv.Addr(), 4, 8, 2*time.Second, sluicePacer(fmt.Sprint("perf", time.Now().UnixNano()%1e6))); err != nil {
			t.Fatal(err)
		}
	})
	return baseline, sluice
}

// printPerf writes the table: each figure for the baseline, Redis and
// NATS, with the ratio to the baseline and the target.
func printPerf(w io.Writer, f map[string]*perfFigures) {
	b, r, n := f["baseline"], f["redis"], f["nats"]
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }
	ratio := func(x, base float64) string { return fmt.Sprintf("%.2f×", x/base) }
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nfigure\tbaseline\tredis\tnats\ttarget\tredis\tnats")
	row := func(cells ...string) { fmt.Fprintln(tw, joinTab(cells)) }
	row("ceiling, no cap, 30,000 backlog, jobs/s", fmt.Sprintf("%.0f", b.ceiling),
		fmt.Sprintf("%.0f (%s)", r.ceiling, ratio(r.ceiling, b.ceiling)), fmt.Sprintf("%.0f (%s)", n.ceiling, ratio(n.ceiling, b.ceiling)),
		"≥1.3× redis, ≥1.1× nats", met(r.ceiling >= 1.3*b.ceiling), met(n.ceiling >= 1.1*b.ceiling))
	row(fmt.Sprintf("  the same at sink.max_in_flight %d (default 256), jobs/s", perfFewInFlight), "–",
		fmt.Sprintf("%.0f (%s)", r.ceilingFew, ratio(r.ceilingFew, b.ceiling)), fmt.Sprintf("%.0f (%s)", n.ceilingFew, ratio(n.ceilingFew, b.ceiling)), "–", "", "")
	row("CPU ms per 1,000 jobs at the ceiling", fmt.Sprintf("%.1f", b.cpuPer1000.Seconds()*1e3),
		fmt.Sprintf("%.1f (%s)", r.cpuPer1000.Seconds()*1e3, ratio(r.cpuPer1000.Seconds(), b.cpuPer1000.Seconds())),
		fmt.Sprintf("%.1f (%s)", n.cpuPer1000.Seconds()*1e3, ratio(n.cpuPer1000.Seconds(), b.cpuPer1000.Seconds())), "–", "", "")
	split := func(c cpuParts) string {
		return fmt.Sprintf("%.1f / %.1f / %.1f / %.1f", c.workers.Seconds()*1e3, c.redis.Seconds()*1e3, c.nats.Seconds()*1e3, c.rest.Seconds()*1e3)
	}
	row("  of which workers / redis / nats-server / test process", split(b.cpuSplit), split(r.cpuSplit), split(n.cpuSplit), "–", "", "")
	row("provider connections opened per 1,000 jobs at the ceiling", fmt.Sprintf("%.1f", b.connsPer1000),
		fmt.Sprintf("%.1f", r.connsPer1000), fmt.Sprintf("%.1f", n.connsPer1000), "–", "", "")
	row("allocations per job in the replicas", "–", fmt.Sprintf("%.0f", r.allocsPerJob), fmt.Sprintf("%.0f", n.allocsPerJob), "–", "", "")
	row("slots forfeited per job at the ceiling", "–", forfeitsText(r.forfeits), forfeitsText(n.forfeits), "–", "", "")
	calls := func(f *perfFigures) string { return fmt.Sprintf("%.3f / %.3f", f.pacerCalls, f.ackBatches) }
	row("pacer calls / ack batches per job at the ceiling", "– (no acks)", calls(r), calls(n), "–", "", "")
	for i, q := range []string{"p50", "p99", "max"} {
		target, okR, okN := "–", "", ""
		switch i {
		case 0:
			target, okR, okN = "≤1.2× baseline", met(r.latency[0] <= b.latency[0]*12/10), met(n.latency[0] <= b.latency[0]*12/10)
		case 1:
			target, okR, okN = "≤1× baseline", met(r.latency[1] <= b.latency[1]), met(n.latency[1] <= b.latency[1])
		}
		row("latency "+q+", 200/s offered, cap 500", ms(b.latency[i]),
			fmt.Sprintf("%s (%s)", ms(r.latency[i]), ratio(float64(r.latency[i]), float64(b.latency[i]))),
			fmt.Sprintf("%s (%s)", ms(n.latency[i]), ratio(float64(n.latency[i]), float64(b.latency[i]))), target, okR, okN)
	}
	row("  measured jobs whose slot came with their fetch (rides)", "–", fmt.Sprintf("%.0f%%", 100*r.rode), "– (no Redis read to ride)", "–", "", "")
	hop := func(f *perfFigures) string { return ms(f.hop[0]) + " / " + ms(f.hop[1]) }
	row("  of which the queue: enqueue → waiting fetch, p50 / p99", hop(b), hop(r), hop(n), "–", "", "")
	row("  Redis's own time per call at 200/s, p50 (SLOWLOG)", b.calls.text("rpush", "blpop"),
		r.calls.text("xadd", "xreadgroup", "reserve.lua", "ackbatch.lua"), n.calls.text("reserve.lua"), "–", "", "")
	row("pacer Redis calls per job, 5,000/s offered", "–", fmt.Sprintf("%.3f", r.load.pacerCalls), fmt.Sprintf("%.3f", n.load.pacerCalls),
		"≤0.1", met(r.load.pacerCalls <= 0.1), met(n.load.pacerCalls <= 0.1))
	row("Redis commands / reads per job, 5,000/s", "1 / 1 (BLPOP)", fmt.Sprintf("%.2f / %.2f", r.load.redisCmds, r.load.redisReads),
		fmt.Sprintf("%.2f / %.2f", n.load.redisCmds, n.load.redisReads), "–", "", "")
	row("NATS messages in / out per job, 5,000/s", "–", "–", fmt.Sprintf("%.2f / %.2f", n.load.natsIn, n.load.natsOut), "–", "", "")
	row("replica peak RSS (VmHWM), 10,000/s offered", "–", fmt.Sprintf("%.0f MB", r.load.rssMB), fmt.Sprintf("%.0f MB", n.load.rssMB),
		"≤64 MB", met(r.load.rssMB <= 64), met(n.load.rssMB <= 64))
	row("pacer grants/s, 4 × 8 callers, cap never reached", fmt.Sprintf("%.0f (one call per grant)", b.grants),
		fmt.Sprintf("%.0f (%s)", r.grants, ratio(r.grants, b.grants)), "(same pacer)", "≥10× baseline", met(r.grants >= 10*b.grants), "")
	_ = tw.Flush()
	fmt.Fprintf(w, "\nbaseline: %d goroutines BLPOP one Redis list and POST each job, no acks, no cap. sluice: %d dispatcher processes.\n", perfWorkers, benchReplicas)
	fmt.Fprintln(w, "CPU: utime+stime of redis-server, nats-server, the workers (the dispatchers, or the baseline's worker, a process of its own) and the test process (the provider, the producer; nats-server too, embedded, where no nats-server binary is on the PATH), first delivery to last.")
	fmt.Fprintln(w, "Redis: commands clients sent (MONITOR, commands inside scripts not counted; pacer = EVALSHA of pacer/*.lua) and total_reads_processed (a pipeline is one read), including the producer's enqueues.")
	fmt.Fprintln(w, "NATS: the server's in_msgs / out_msgs (pull requests, deliveries, acks and their replies, the producer's publishes).")
}

// forfeitsText is "late 0.70 · stale 0.11 …", the reasons of at least
// 0.005 per job in order, or "0".
func forfeitsText(m map[string]float64) string {
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(m)) {
		if m[reason] >= 0.005 {
			parts = append(parts, fmt.Sprintf("%s %.2f", reason, m[reason]))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, " · ")
}

// joinTab joins cells with tabs.
func joinTab(cells []string) string {
	s := ""
	for i, c := range cells {
		if i > 0 {
			s += "\t"
		}
		s += c
	}
	return s
}
