package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Local mode (pacer.when_unavailable: local) on the NATS backend: three
// replicas reach Redis through one link (toxiproxy) and NATS directly. The
// link is cut for 20s while a backlog saturates them. Delivery goes on
// during the cut at each replica's share of the last rate × the safety
// factor, the provider never sees more than the cap in any 1s window,
// arrivals stop once pacer.max_degraded (8s) has passed, and resume after
// the link is back.
func TestDegradedCut(t *testing.T) {
	const (
		rate        = 300.0
		replicas    = 3
		jobs        = 4200
		maxDegraded = 8 * time.Second
		cutFor      = 20 * time.Second
		// stopsWithin bounds how long after the cut + max_degraded arrivals
		// may go on: max_degraded counts from the last reply before the cut,
		// no local slot falls after it, and a request leaves within
		// max_lateness of its slot; the rest is one round trip and margin
		// for a loaded machine.
		stopsWithin = 300 * time.Millisecond
		safety      = 0.75 // pacer.degraded_safety's default
	)
	c := newCluster(t, "nats", rate, "SLUICE_PACER_WHEN_UNAVAILABLE=local", "SLUICE_PACER_MAX_DEGRADED="+maxDegraded.String())
	link := newRedisLink(t, c.redis.Addr())
	ids := c.enqueue("degraded", "bob", jobs)
	procs := c.startWith(replicas, []string{"SLUICE_REDIS_URL=" + link.url()})

	// The local rate divides by the replicas each one last counted: wait
	// until all count three (they announce every 2s).
	eventually(t, 30*time.Second, "every replica counting 3 replicas", func() bool {
		for _, p := range procs {
			if gauge(p, "sluice_pacer_replicas") != replicas {
				return false
			}
		}
		return true
	})
	c.waitDelivered(300, 30*time.Second)
	link.cut()
	cutAt := time.Now()

	// Every replica's pacer went through the link: each is degraded, and
	// still ready (it delivers), until max_degraded.
	eventually(t, 5*time.Second, "every replica in local mode", func() bool {
		for _, p := range procs {
			if gauge(p, "sluice_pacer_degraded") != 1 {
				return false
			}
		}
		return true
	})
	readyz := readyzURL(t, procs[0])
	if code, body := getBody(readyz); code != http.StatusOK || !strings.Contains(body, "degraded") {
		t.Errorf("/readyz in local mode: %d %q, want 200 saying degraded", code, body)
	}
	eventually(t, maxDegraded+5*time.Second, "/readyz 503 after max_degraded", func() bool {
		code, _ := getBody(readyz)
		return code == http.StatusServiceUnavailable
	})
	// The cut lasts 20s: the length of the fault, not a wait for a condition.
	<-time.After(time.Until(cutAt.Add(cutFor)))
	restoredAt := time.Now()
	link.restore()
	c.waitDelivered(jobs, drainTime(jobs, rate))

	arr := c.prov.Arrivals()
	times := arrivalTimes(arr)
	resumed := restoredAt
	if after := within(times, restoredAt, time.Time{}); len(after) > 0 {
		resumed = after[0]
	}
	delivered := map[string]bool{}
	for _, a := range arr {
		if a.Delivered() {
			delivered[a.JobID] = true
		}
	}
	for _, id := range ids {
		if !delivered[id] {
			t.Errorf("job %s never delivered", id)
		}
	}
	// Every arrival counts in the windows, the entry into local mode and the
	// return included. The cap is promised for 1s windows in local mode;
	// 100ms windows are logged (the replicas' local schedules are not aligned).
	p := promiseOf(t, rate, c.env)
	all := statsOf(times, span{cutAt, resumed.Add(settle)})
	rel := func(at time.Time) string {
		if at.Before(restoredAt) {
			return fmt.Sprintf("cut%+.2fs", at.Sub(cutAt).Seconds())
		}
		return fmt.Sprintf("restore%+.2fs", at.Sub(restoredAt).Seconds())
	}
	t.Logf("whole run: %d arrivals; busiest 1s %d at %s (bound %d), busiest 100ms %d at %s (cap/10 + burst %d); mean outside the cut and return %.1f/s",
		all.Count, all.Max1s, rel(all.At1s), p.max1s(), all.Max100ms, rel(all.At100ms), p.max100ms(), all.Mean)
	if all.Max1s > p.max1s() {
		t.Errorf("%d arrivals in the 1s from %s; want at most cap + burst = %d", all.Max1s, rel(all.At1s), p.max1s())
	}
	checkQuiet(t, "cut + max_degraded", times, cutAt, restoredAt, maxDegraded+stopsWithin)

	// Entering local mode takes as long as the Redis client takes to fail
	// a call (1.7s with go-redis's retries against a refused port).
	local := within(times, cutAt.Add(3*time.Second), cutAt.Add(maxDegraded-500*time.Millisecond))
	localRate := float64(len(local)) / (maxDegraded - 3500*time.Millisecond).Seconds()
	want := rate * (1 - p.headroom) * safety
	for _, ph := range []struct {
		name     string
		from, to time.Time
	}{
		{"entry (cut −1s … +3s)", cutAt.Add(-time.Second), cutAt.Add(3 * time.Second)},
		{"local mode (cut −1s … +max_degraded +1s)", cutAt.Add(-time.Second), cutAt.Add(maxDegraded + time.Second)},
		{"return (restore … first arrival +3s)", restoredAt, resumed.Add(3 * time.Second)},
	} {
		w := within(times, ph.from, ph.to)
		m1, _ := busiest(w, time.Second)
		m100, _ := busiest(w, 100*time.Millisecond)
		t.Logf("%s: busiest 1s %d, busiest 100ms %d", ph.name, m1, m100)
	}
	t.Logf("during the cut: %.1f/s delivered (local schedules %.1f/s); sending resumed %s after the restore",
		localRate, want, resumed.Sub(restoredAt).Round(time.Millisecond))
	if m, err := scrapeAll(c); err == nil {
		t.Logf("replicas: lateness p50/p99/max %s; forfeited %s", m.latenessText(), m.forfeitText())
	}
	if localRate < 0.5*want {
		t.Errorf("delivered %.1f/s during the cut; want at least half the local schedules' %.1f/s", localRate, want)
	}
	if resumed.Sub(restoredAt) > 5*time.Second {
		t.Errorf("sending resumed %s after the restore; want within 5s", resumed.Sub(restoredAt))
	}
	for _, p := range procs {
		if got := gauge(p, "sluice_pacer_degraded"); got != 0 {
			t.Errorf("%s: sluice_pacer_degraded %v after the restore, want 0", p.name, got)
		}
		if got := gauge(p, "sluice_pacer_degraded_total"); got != 1 {
			t.Errorf("%s: sluice_pacer_degraded_total %v, want 1 episode", p.name, got)
		}
	}
}

// gauge reads one unlabelled series from p's /metrics; NaN when it cannot.
func gauge(p *proc, name string) float64 {
	u, ok := p.metricsURL(10 * time.Second)
	if !ok {
		return math.NaN()
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return math.NaN()
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if s := sample.FindStringSubmatch(sc.Text()); s != nil && s[1] == name && s[2] == "" {
			if v, err := strconv.ParseFloat(s[3], 64); err == nil {
				return v
			}
		}
	}
	return math.NaN()
}

// readyzURL is p's /readyz, beside its /metrics.
func readyzURL(t *testing.T, p *proc) string {
	t.Helper()
	u, ok := p.metricsURL(10 * time.Second)
	if !ok {
		t.Fatalf("%s logged no metrics URL", p.name)
	}
	return strings.TrimSuffix(u, "/metrics") + "/readyz"
}

// getBody GETs url and returns the status and body; 0 when it fails.
func getBody(url string) (int, string) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
