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
//
// At 3,000/s with pacer.max_lateness 5ms (the headroom 5% with it):
// strides need slots a few intervals apart within 90% of the lateness
// bound, which at the default 2ms only a cap of about 5,000/s gives, and
// at 5,000/s this 2-core host, which also runs Redis and the provider,
// drained the backlog at 0.84–0.98 of the cap with few slots forfeited
// in the judged part, so the schedule went partly unasked (where that
// time goes is not yet known). At 3,000/s the drain reads 0.949–0.950 of
// the cap, the schedule's rate, and the steady part 0.17–0.19 calls per
// job.
func TestExactSteadyThenBacklog(t *testing.T) {
	const rate, steady, secs, backlog = 3000.0, 1200.0, 3, 9000
	c := newCluster(t, "redis", rate, "SLUICE_PACER_MAX_LATENESS=5ms")
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
