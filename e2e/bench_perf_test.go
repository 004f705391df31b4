package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/queue"
)

// TestBenchTablePerf prints the performance table of `make bench` (issue
// 15): for each backend and for a bare Redis list worker (the baseline,
// perf_baseline_test.go) run in the same test, the ceiling (for sluice also
// at sink.max_in_flight perfFewInFlight), CPU per job, latency under the
// cap, round trips per job, the replicas' peak RSS and the pacer's grants
// per second, each with its ratio to the baseline and whether its target
// is met. Only with SLUICE_BENCH=1.
func TestBenchTablePerf(t *testing.T) {
	if os.Getenv("SLUICE_BENCH") == "" {
		t.Skip("set SLUICE_BENCH=1 (make bench) to run the end-to-end benchmark")
	}
	figs := map[string]*perfFigures{}
	for _, b := range []string{"baseline", "redis", "nats"} {
		f := &perfFigures{}
		runtime.GC()
		f.latency, f.rode, f.calls = perfLatency(t, b)
		f.hop = perfHop(t, b)
		runtime.GC()
		f.ceilingFigures = perfCeiling(t, b, "")
		if b != "baseline" {
			runtime.GC()
			f.ceilingFew = perfCeiling(t, b, fmt.Sprintf("-inflight%d", perfFewInFlight),
				fmt.Sprintf("SLUICE_SINK_MAX_IN_FLIGHT=%d", perfFewInFlight)).ceiling
			runtime.GC()
			f.load = perfLoad(t, b)
		}
		figs[b] = f
	}
	figs["baseline"].grants, figs["redis"].grants = perfGrants(t)
	printPerf(os.Stdout, figs)
}

// perfFigures are one column of the table.
type perfFigures struct {
	ceilingFigures
	ceilingFew float64 // jobs/s, no cap, at sink.max_in_flight perfFewInFlight
	latency    [3]time.Duration
	rode       float64          // share of the measured latency jobs whose slot rode on their fetch (pacer.Ride)
	calls      callTimes        // Redis's own time per call at 200/s, after the latency row
	hop        [2]time.Duration // the queue's part of the latency: p50, p99
	load       loadFigures
	grants     float64 // pacer grants/s, 4 × 8 callers
}

// loadFigures are counted at 5,000/s offered (round trips) and 10,000/s
// (RSS), cap 20,000.
type loadFigures struct {
	redisReads, redisCmds, pacerCalls float64 // per job
	natsIn, natsOut                   float64 // per job; 0 on Redis
	rssMB                             float64 // the largest replica's VmHWM
}

const (
	perfCeilingJobs = 30000
	perfWorkers     = 32 // the baseline's goroutines
	// perfFewInFlight is sink.max_in_flight in the second ceiling run of
	// each backend (the default is 256 per replica): with no cap, the
	// replicas fill every connection they may open while the provider, on
	// the same cores, is the bottleneck, and the row shows what those
	// waiting requests cost.
	perfFewInFlight = 32
)

// ceilingFigures are what the ceiling run measures.
type ceilingFigures struct {
	ceiling      float64            // jobs/s, no cap
	cpuPer1000   time.Duration      // CPU of every process per 1,000 jobs at the ceiling
	cpuSplit     cpuParts           // the same, by process
	connsPer1000 float64            // connections the provider accepted per 1,000 jobs
	allocsPerJob float64            // heap allocations per job in the replicas; <0: not measured
	forfeits     map[string]float64 // slots forfeited per job at the ceiling, by reason
	pacerCalls   float64            // the replicas' calls for slots per job (sluice_pacer_calls_total)
	ackBatches   float64            // the replicas' batches of acks per job (sluice_ack_batches_total)
}

// cpuParts is CPU by process: the workers (the dispatchers, or the
// baseline's worker process), redis-server, nats-server (0 when embedded
// in the test process, or not used), and the test process (the provider,
// the producer).
type cpuParts struct {
	workers, redis, nats, rest time.Duration
}

// total is the CPU of every process.
func (c cpuParts) total() time.Duration { return c.workers + c.redis + c.nats + c.rest }

// perfSample is what the table reads at the start and end of a window.
type perfSample struct {
	at        time.Time
	delivered int
	parts     cpuParts
	mallocs   float64
	conns     int64 // connections the provider accepted
}

// perfCluster is a cluster on either backend, or a bare Redis list for the
// baseline, with the process ids whose CPU the table counts.
type perfCluster struct {
	*cluster
	nats *perfNATS     // nil unless the NATS backend
	list string        // the baseline's list
	pid  int           // the baseline worker's process, once started
	rdb  *redis.Client // the test's one client of the cluster's Redis
}

// newPerfCluster starts Redis, the provider and, for "nats", a NATS server
// whose message counts the table reads. No replica is started.
func newPerfCluster(t *testing.T, backend string, rate float64, env ...string) *perfCluster {
	t.Helper()
	c := &perfCluster{cluster: newCluster(t, "redis", rate, env...)}
	// One client for the test's own calls: testredis's Client opens a new
	// one each call, and a push on a new connection would count its dial
	// in the baseline's latency.
	c.rdb = c.redis.Client()
	switch backend {
	case "nats":
		c.nats = startPerfNATS(t)
		c.backend = backend
		c.env = append(c.env, "SLUICE_QUEUE_BACKEND=nats", "SLUICE_NATS_URL="+c.nats.url())
		c.q = openNATSQueue(t, c.nats, c.name)
	case "baseline":
		c.list = "perf:{" + c.name + "}:jobs"
	}
	return c
}

// sample reads the CPU of the replicas, Redis and this process (the
// provider, the producer, the embedded NATS server and the baseline
// worker), and the replicas' allocations.
func (c *perfCluster) sample(t *testing.T) perfSample {
	t.Helper()
	s := perfSample{delivered: c.delivered(), conns: c.prov.Connections()}
	rpid, err := redisPID(context.Background(), c.rdb)
	if err != nil {
		t.Fatal(err)
	}
	cpu := func(pid int) time.Duration {
		d, err := cpuOf(pid)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	s.parts.redis, s.parts.rest = cpu(rpid), cpu(os.Getpid())
	if c.nats != nil && c.nats.pid() != 0 {
		s.parts.nats = cpu(c.nats.pid())
	}
	for _, p := range c.allProcs() {
		s.parts.workers += cpu(p.cmd.Process.Pid)
	}
	if c.pid != 0 {
		s.parts.workers = cpu(c.pid)
	}
	if c.list == "" {
		if s.mallocs, err = mallocs(c.cluster); err != nil {
			t.Fatal(err)
		}
	}
	s.at = time.Now()
	return s
}

// enqueueOne puts one job into the backend now.
func (c *perfCluster) enqueueOne(id string) error {
	if c.list != "" {
		return baselinePush(context.Background(), c.rdb, c.list, id)
	}
	j := &queue.Job{ID: id, Lane: "default", Payload: json.RawMessage(`{"text":"hi"}`)}
	_, err := c.q.Enqueue(context.Background(), j)
	return err
}

// run starts the replicas, or the baseline worker.
func (c *perfCluster) run(t *testing.T) {
	t.Helper()
	if c.list == "" {
		c.start(benchReplicas)
		waitReady(t, c.cluster)
		return
	}
	c.pid = startBaselineWorker(t, c.redis.Addr(), c.list, c.prov.URL(), perfWorkers)
}

// perfLatency offers 200 jobs/s at cap 500: enqueue → provider arrival of
// 1,000 jobs after 100 unmeasured, and the share of the measured jobs
// whose slot came with their fetch (rides that carried a job:
// sluice_pacer_rides_total less the idle forfeits, counted from the end
// of the warm-up; 0 for the baseline).
func perfLatency(t *testing.T, backend string) (l [3]time.Duration, rode float64, calls callTimes) {
	const offered, warmup, jobs = 200, 100, 1000
	t.Run("latency-"+backend, func(t *testing.T) {
		c := newPerfCluster(t, backend, 500)
		c.run(t)
		carried := func() float64 {
			if c.list != "" {
				return 0
			}
			m, err := scrapeAll(c.cluster)
			if err != nil {
				t.Fatal(err)
			}
			return m.rides - m.forfeited["idle"]
		}
		var warm float64
		tick := time.NewTicker(time.Second / offered)
		defer tick.Stop()
		for i := range warmup + jobs {
			if i == warmup {
				c.waitDelivered(warmup, time.Minute)
				warm = carried()
			}
			<-tick.C
			id := fmt.Sprintf("l-%05d", i)
			if i < warmup {
				id = fmt.Sprintf("w-%05d", i)
			}
			if err := c.enqueueOne(id); err != nil {
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
		l = [3]time.Duration{mockprovider.Percentile(waits, 50), mockprovider.Percentile(waits, 99), waits[len(waits)-1]}
		rode = (carried() - warm) / jobs
		calls = perfCallTimes(t, c)
	})
	return l, rode, calls
}

// perfCeiling drains a 30,000-job backlog with no cap and returns jobs/s,
// CPU per 1,000 jobs and the replicas' allocations per job, counted from
// the first delivery to the last, and the slots the replicas forfeited per
// job (late or unclaimed: a CPU-starved replica forfeits many), their
// calls for slots and their batches of acks per job. The subtest is named
// ceiling-<backend><suffix>; env goes to the replicas (configuration by
// environment, SLUICE_...).
func perfCeiling(t *testing.T, backend, suffix string, env ...string) (f ceilingFigures) {
	name := "ceiling-" + backend + suffix
	t.Run(name, func(t *testing.T) {
		c := newPerfCluster(t, backend, 1e6, append([]string{"SLUICE_PACER_BURST=1000", "SLUICE_METRICS_PPROF=true"}, env...)...)
		if c.list != "" {
			for i := 0; i < perfCeilingJobs; i += 500 {
				ids := make([]string, 500)
				for k := range ids {
					ids[k] = fmt.Sprintf("c-%05d", i+k)
				}
				if err := baselinePush(context.Background(), c.rdb, c.list, ids...); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			c.enqueue("c", "bob", perfCeilingJobs)
		}
		c.run(t)
		c.waitDelivered(1, 30*time.Second)
		s0 := c.sample(t)
		if dir := os.Getenv("SLUICE_BENCH_PROFILE"); dir != "" && c.list == "" {
			profileReplica(t, c.cluster, filepath.Join(dir, name+".pprof"))
		}
		c.waitDelivered(perfCeilingJobs, 3*time.Minute)
		s1 := c.sample(t)
		jobs := float64(s1.delivered - s0.delivered)
		per1000 := func(d time.Duration) time.Duration { return time.Duration(float64(d) / jobs * 1000) }
		f.ceiling = c.prov.Report(time.Time{}, time.Time{}).MeanRate
		f.cpuPer1000 = per1000(s1.parts.total() - s0.parts.total())
		f.cpuSplit = cpuParts{workers: per1000(s1.parts.workers - s0.parts.workers),
			redis: per1000(s1.parts.redis - s0.parts.redis), nats: per1000(s1.parts.nats - s0.parts.nats),
			rest: per1000(s1.parts.rest - s0.parts.rest)}
		f.connsPer1000 = float64(s1.conns-s0.conns) / jobs * 1000
		f.allocsPerJob = -1
		if c.list == "" {
			f.allocsPerJob = (s1.mallocs - s0.mallocs) / jobs
			m, err := scrapeAll(c.cluster)
			if err != nil {
				t.Fatal(err)
			}
			f.forfeits = map[string]float64{}
			for reason, n := range m.forfeited {
				f.forfeits[reason] = n / perfCeilingJobs
			}
			f.pacerCalls, f.ackBatches = m.calls/perfCeilingJobs, m.acks/perfCeilingJobs
		}
	})
	return f
}

// profileReplica writes a 2s CPU profile of the first replica to path and
// the allocations it made over the same 2s beside it (.allocs.pprof)
// (SLUICE_BENCH_PROFILE=dir make bench; read them with go tool pprof).
func profileReplica(t *testing.T, c *cluster, path string) {
	t.Helper()
	u, ok := c.allProcs()[0].metricsURL(10 * time.Second)
	if !ok {
		t.Fatal("profile: no metrics URL")
	}
	base := strings.TrimSuffix(u, "/metrics") + "/debug/pprof/"
	allocs := strings.TrimSuffix(path, ".pprof") + ".allocs.pprof"
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, p := range []struct{ url, path string }{{base + "profile?seconds=2", path}, {base + "allocs?seconds=2", allocs}} {
		wg.Go(func() { errs[i] = fetchProfile(p.url, p.path) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("CPU and allocation profiles of %s: %s, %s", c.allProcs()[0].name, path, allocs)
}

// fetchProfile writes the profile served at url to path.
func fetchProfile(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s: %v", url, resp.Status, err)
	}
	return os.WriteFile(path, b, 0o644)
}
