package e2e_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// Steady demand under the cap (40% of it), then a backlog on top. Under
// the cap each replica takes slots spread at its own pace (a stride,
// leaving the grid points between as gaps for the others), so the pacer's
// Redis calls per job fall far below one; when the backlog comes the
// replicas go back to slots one interval apart. Judged at the provider as every exact test is:
// nothing lost, no window over the cap, and over the backlog's drain (from
// half a second after it landed) a mean at the schedule's rate. How fast
// one replica switches is TestStridedReplicaSwitchesWhenSaturated (pacer).
func TestExactSteadyThenBacklog(t *testing.T) {
	const rate, steady, secs, backlog = 5000.0, 2000.0, 3, 15000
	c := newCluster(t, "redis", rate)
	c.start(4)
	warm := c.enqueue("warm", "bob", 200) // connections dialled, scripts loaded
	c.waitDelivered(len(warm), drainTime(len(warm), rate))

	mon := monitor(t, c.redis.Addr())
	d0 := c.delivered()
	start := time.Now()
	ids := append(warm, offerBob(t, c, "steady", steady, secs*time.Second)...)
	mon.stop()
	perJob := float64(mon.pacer.Load()) / float64(c.delivered()-d0)
	t.Logf("steady %g/s under cap %g/s: %.3f pacer calls per job", steady, rate, perJob)
	if perJob > 0.3 {
		t.Errorf("%.3f pacer Redis calls per job under the cap; want at most 0.3 (slots a stride apart; about 1 with consecutive slots)", perJob)
	}

	// At once, while the replicas hold slots a stride apart.
	ids = append(ids, c.enqueue("backlog", "bob", backlog)...)
	landed := time.Now()
	c.waitDelivered(len(ids), drainTime(len(ids), rate))
	t.Logf("arrivals per 100ms from 100ms before the backlog landed: %v",
		countsPer(arrivalTimes(c.prov.Arrivals()), landed.Add(-100*time.Millisecond), 100*time.Millisecond))
	checkExact(t, c, rate, ids, span{from: start.Add(-time.Minute), to: landed.Add(settle)})
}

// offerBob enqueues jobs of user bob, routed to their lanes, at rate per
// second for d (offerPaced), and returns their IDs.
func offerBob(t *testing.T, c *cluster, prefix string, rate float64, d time.Duration) []string {
	t.Helper()
	return offerPaced(t, c.q, rate, d, func(i int) *queue.Job {
		j := &queue.Job{ID: fmt.Sprintf("%s-%06d", prefix, i), User: "bob", Payload: json.RawMessage(`{"text":"hi"}`)}
		j.Lane = c.prio.Route(j)
		return j
	})
}
