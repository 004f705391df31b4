package e2e_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// A cluster-wide bound on requests open at the provider: four replicas,
// each allowed 16 open requests of its own, share sink.max_in_flight_total
// 10 against a provider that takes 100ms to answer; replicas are killed
// (SIGKILL, holding permits) and others started. The provider never has
// more than 10 requests open at once, and every job is delivered.
func TestConcurrencyCap(t *testing.T) {
	const total, jobs = 10, 800
	c := newCluster(t, "redis", 500, "SLUICE_SINK_MAX_IN_FLIGHT=16",
		fmt.Sprintf("SLUICE_SINK_MAX_IN_FLIGHT_TOTAL=%d", total))
	c.prov.SetResponder(func(mockprovider.Arrival) mockprovider.Answer {
		return mockprovider.Answer{Delay: 100 * time.Millisecond}
	})
	c.enqueue("cc", "bob", jobs)
	procs := c.start(4)
	// Without the bound, 4 × 16 could be open: wait for the cap to be met.
	eventually(t, 30*time.Second, "the cap reached at the provider", func() bool { return c.prov.MaxOpen() >= total })
	for i, p := range procs[:2] { // kill two, holding permits, one after the other
		at := c.delivered()
		p.signal(syscall.SIGKILL)
		if _, ok := p.wait(10 * time.Second); !ok {
			t.Fatalf("dispatcher %d did not die", i)
		}
		c.start(1)
		eventually(t, 60*time.Second, "deliveries going on after the kill", func() bool { return c.delivered() >= at+50 })
	}
	c.waitDelivered(jobs, 120*time.Second)
	t.Logf("most requests open at the provider at once: %d (bound %d); %d arrivals for %d jobs", c.prov.MaxOpen(), total, len(c.prov.Arrivals()), jobs)
	if got := c.prov.MaxOpen(); got > total {
		t.Errorf("%d requests open at the provider at once; want at most sink.max_in_flight_total = %d", got, total)
	}
}
