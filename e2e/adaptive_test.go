package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// The provider's own capacity is 300/s while pacer.rate is 400: sluice
// finds it within 10s (≥ 95% of 300/s delivered, ≤ 2% answered 429) and
// stays there; when the capacity returns to 400, it climbs back to ≥ 95%
// of 400 within 30s. Three replicas, both backends.
func TestAdaptiveFindsCapacity(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) {
			r := runCapacity(t, backend)
			t.Logf("%s", r)
			r.check(t)
		})
	}
}

// capacityRun is what the provider saw: per second, delivered and 429s.
type capacityRun struct {
	low, high      float64 // the provider's capacity before and after the change
	judgeFrom      time.Duration
	changeAt       time.Duration
	delivered, thr []int // per second from the first arrival
	settle         time.Duration
	climb          time.Duration // from the change to ≥ 95% of high over a second; -1 never
	steadyRate     float64       // 2xx per second in the judged seconds, the test process's stalls left out (quietRate)
	stalled        time.Duration
	steadyShare    float64
	status         string  // dispatcher status before the change
	effective      float64 // sluice_pacer_effective_rate before the change
	cuts, holds    float64 // summed over the replicas before the change
}

func (r capacityRun) String() string {
	return fmt.Sprintf("capacity %g→%g/s: settled after %s; seconds %s–%s: %.1f/s delivered (the test process stalled %s of them, left out), %.2f%% answered 429; "+
		"back at ≥ 95%% of %g/s %s after the change; delivered per second %v; before the change: effective rate %.1f, %g cuts, %g holds; status:\n%s",
		r.low, r.high, r.settle, r.judgeFrom, r.changeAt, r.steadyRate, r.stalled, r.steadyShare*100, r.high, r.climb, r.delivered,
		r.effective, r.cuts, r.holds, r.status)
}

func (r capacityRun) check(t *testing.T) {
	t.Helper()
	if r.steadyRate < 0.95*r.low {
		t.Errorf("delivered %.1f/s at capacity %g, want at least %.1f", r.steadyRate, r.low, 0.95*r.low)
	}
	if r.steadyShare > 0.02 {
		t.Errorf("%.2f%% answered 429 at capacity %g, want at most 2%%", r.steadyShare*100, r.low)
	}
	if r.climb < 0 || r.climb > 30*time.Second {
		t.Errorf("back at 95%% of %g/s after %s, want within 30s", r.high, r.climb)
	}
	if !strings.Contains(r.status, "the provider is throttling: rate ") {
		t.Errorf("status before the change does not show the adaptation:\n%s", r.status)
	}
	if r.effective <= 0 || r.effective >= 0.9*r.high || r.cuts < 1 || r.holds != 1 {
		t.Errorf("metrics before the change: sluice_pacer_effective_rate %g, cuts %g, holds %g; "+
			"want under 90%% of %g, at least one cut, one hold (the episode's first Retry-After)", r.effective, r.cuts, r.holds, r.high)
	}
}

// runCapacity runs three replicas at pacer.rate 400 against a provider of
// capacity 300, judged from 10s to 20s, then raises the capacity to 400.
func runCapacity(t *testing.T, backend string) capacityRun {
	const rate, low, high = 400.0, 300.0, 400.0
	r := capacityRun{low: low, high: high, judgeFrom: 10 * time.Second, changeAt: 20 * time.Second}
	c := newCluster(t, backend, rate)
	c.prov.SetCapacity(low)
	c.enqueue("cap", "bob", int(low*20+high*35))
	c.start(3)
	first := firstArrival(t, c)
	// The change comes at first+changeAt, on the provider's clock; just
	// before, status and the metrics show the adaptation.
	waitUntil(t, first.Add(r.changeAt-time.Second))
	r.status = c.admin("status")
	m, err := scrapeAll(c)
	if err != nil {
		t.Fatal(err)
	}
	r.effective, r.cuts, r.holds = m.effective, m.cuts, m.holds
	waitUntil(t, first.Add(r.changeAt))
	c.prov.SetCapacity(high)
	eventually(t, r.changeAt+40*time.Second, "the climb measured", func() bool {
		r.delivered, r.thr = perSecond(c.prov.Arrivals(), first)
		r.climb = climbAfter(r.delivered, int(r.changeAt/time.Second), 0.95*high)
		return r.climb >= 0 || len(r.delivered) > int(r.changeAt/time.Second)+32
	})
	from, to := int(r.judgeFrom/time.Second), int(r.changeAt/time.Second)
	var d, th int
	for i := from; i < to; i++ {
		d += r.delivered[i]
		th += r.thr[i]
	}
	var ok []time.Time
	for _, a := range c.prov.Arrivals() {
		if a.Status/100 == 2 {
			ok = append(ok, a.At)
		}
	}
	r.steadyRate, r.stalled = quietRate(ok, c.stalls.stalls(), first.Add(r.judgeFrom), first.Add(r.changeAt))
	r.steadyShare = float64(th) / float64(d+th)
	r.settle = settledAfter(r.delivered[:to], r.thr[:to], 0.9*low)
	if os.Getenv("SLUICE_E2E_DEBUG") != "" {
		for _, p := range c.allProcs() {
			b, _ := os.ReadFile(p.log)
			t.Logf("%s:\n%s", p.name, grepLines(string(b), "pacer:"))
		}
	}
	return r
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// firstArrival waits for the provider's first arrival and returns its time.
func firstArrival(t *testing.T, c *cluster) time.Time {
	t.Helper()
	var first time.Time
	eventually(t, 30*time.Second, "first arrival", func() bool {
		if a := c.prov.Arrivals(); len(a) > 0 {
			first = a[0].At
			return true
		}
		return false
	})
	return first
}

// perSecond counts 2xx and 429 answers per second since first.
func perSecond(arr []mockprovider.Arrival, first time.Time) (delivered, throttled []int) {
	for _, a := range arr {
		i := int(a.At.Sub(first) / time.Second)
		if i < 0 {
			continue
		}
		for len(delivered) <= i {
			delivered, throttled = append(delivered, 0), append(throttled, 0)
		}
		switch {
		case a.Status/100 == 2:
			delivered[i]++
		case a.Status == http.StatusTooManyRequests:
			throttled[i]++
		}
	}
	// The last second is still filling.
	if n := len(delivered); n > 0 {
		delivered, throttled = delivered[:n-1], throttled[:n-1]
	}
	return delivered, throttled
}

// climbAfter returns how long after second `from` a whole second first
// delivered at least want; -1 when none did.
func climbAfter(delivered []int, from int, want float64) time.Duration {
	for i := from; i < len(delivered); i++ {
		if float64(delivered[i]) >= want {
			return time.Duration(i+1-from) * time.Second
		}
	}
	return -1
}

// settledAfter returns the start of the run of seconds, to the end, that
// each delivered at least floor with at most 5% answered 429.
func settledAfter(delivered, throttled []int, floor float64) time.Duration {
	i := len(delivered)
	for i > 0 {
		d, th := delivered[i-1], throttled[i-1]
		if float64(d) < floor || float64(th) > 0.05*float64(d+th) {
			break
		}
		i--
	}
	return time.Duration(i) * time.Second
}

// waitUntil blocks until the wall clock passes t.
func waitUntil(t *testing.T, at time.Time) {
	t.Helper()
	if d := time.Until(at); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		<-timer.C
	}
}

// randomThrottles answers 5% of requests 429 with Retry-After: 2, a
// seeded draw, whatever the rate.
func randomThrottles() mockprovider.Responder {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(7, 7))
	return func(mockprovider.Arrival) mockprovider.Answer {
		mu.Lock()
		defer mu.Unlock()
		if rng.Float64() < 0.05 {
			return mockprovider.Answer{Status: http.StatusTooManyRequests, RetryAfter: 2 * time.Second}
		}
		return mockprovider.Answer{}
	}
}

// 5% of requests answered 429 with Retry-After: 2 whatever the rate: the
// cluster holds once, then delivers at least 80% of the cap; nothing is
// lost and nothing dead-lettered for being throttled.
func TestAdaptiveRandomThrottles(t *testing.T) {
	const rate, jobs = 400.0, 10000
	c := newCluster(t, "redis", rate)
	c.prov.SetResponder(randomThrottles())
	ids := c.enqueue("rnd", "bob", jobs)
	c.start(3)
	c.waitDelivered(jobs, 120*time.Second)
	arr := c.prov.Arrivals()
	var ok []time.Time
	seen := map[string]bool{}
	thr := 0
	for _, a := range arr {
		if a.Status/100 == 2 {
			ok = append(ok, a.At)
			seen[a.JobID] = true
		} else {
			thr++
		}
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("job %s never delivered", id)
		}
	}
	slices.SortFunc(ok, func(a, b time.Time) int { return a.Compare(b) })
	end := ok[len(ok)-1].Add(time.Nanosecond)
	// The test process's stalls are left out with their arrivals, as
	// checkExact leaves them out of the mean.
	got, stalled := quietRate(ok, c.stalls.stalls(), arr[0].At, end)
	t.Logf("5%% random 429 with Retry-After 2s, cap %g/s, 3 replicas: %d delivered in %.1fs = %.1f/s (%.2f of the cap; the test process stalled %s, left out), %d answered 429",
		rate, len(ok), end.Sub(arr[0].At).Seconds(), got, got/rate, stalled, thr)
	if got < 0.8*rate {
		t.Errorf("delivered %.1f/s, want at least 0.8 × %g", got, rate)
	}
	if st, err := c.q.Stats(t.Context()); err != nil || st.DeadLetters != 0 {
		t.Errorf("dead letters: %+v, %v; want none", st.DeadLetters, err)
	}
}

// deliveredFor runs three replicas with env against 5% random 429s for d
// from the first arrival and returns the 2xx answers per second.
func deliveredFor(t *testing.T, rate float64, d time.Duration, env ...string) float64 {
	c := newCluster(t, "redis", rate, env...)
	c.prov.SetResponder(randomThrottles())
	c.enqueue("rnd", "bob", int(rate*d.Seconds()*1.2))
	c.start(3)
	first := firstArrival(t, c)
	waitUntil(t, first.Add(d))
	n := 0
	for _, a := range c.prov.Arrivals() {
		if a.Status/100 == 2 && a.At.Before(first.Add(d)) {
			n++
		}
	}
	return float64(n) / d.Seconds()
}
