package e2e_test

import (
	"testing"
	"time"
)

// Light demand, then a backlog, on the redis backend. While the replicas
// are mostly idle, most jobs' slots come with the fetch that brought them
// (the pacer's call rides behind the blocking read: pacer.Ride) instead of
// one Redis round trip after it; when the backlog comes, rides are
// refused (the schedule is not idle) and the replicas ask as usual. Judged
// at the provider as every exact test is: nothing lost, no window over the
// cap, the mean over the backlog's drain at the schedule's rate.
func TestRidesWhileIdleThenBacklog(t *testing.T) {
	const rate, light, secs, backlog = 500.0, 100.0, 2, 1500
	c := newCluster(t, "redis", rate)
	c.start(4)
	warm := c.enqueue("warm", "bob", 20) // connections dialled, clocks settled
	c.waitDelivered(len(warm), drainTime(len(warm), rate))

	m0, err := scrapeAll(c)
	if err != nil {
		t.Fatal(err)
	}
	d0 := c.delivered()
	start := time.Now()
	ids := append(warm, offerBob(t, c, "light", light, secs*time.Second)...)
	c.waitDelivered(len(ids), drainTime(len(ids), rate))
	m1, err := scrapeAll(c)
	if err != nil {
		t.Fatal(err)
	}
	jobs := float64(c.delivered() - d0)
	share := (m1.rides - m0.rides) / jobs
	t.Logf("light %g/s under cap %g/s: %.0f of %.0f jobs' slots rode on their fetch (%.2f); idle forfeits %.0f", light, rate, m1.rides-m0.rides, jobs, share, m1.forfeited["idle"])
	if share < 0.5 {
		t.Errorf("%.2f of the jobs' slots rode on their fetch under light load; want at least half", share)
	}

	ids = append(ids, c.enqueue("backlog", "bob", backlog)...)
	landed := time.Now()
	c.waitDelivered(len(ids), drainTime(len(ids), rate))
	checkExact(t, c, rate, ids, span{from: start.Add(-time.Minute), to: landed.Add(settle)})
}
