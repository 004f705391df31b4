package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/queue"
)

// Tenant limits: three tenants limited to 50/s each under a global 300/s.
// One floods 5,000 jobs at once, each of cost 2 (an SMS of two segments);
// the other two send 20/s each. A tenant's limit counts slots, as the cap
// does: the flooder gets at most 25 requests (50 slots) in any 1s at the
// provider, and still about its rate; the others' jobs are not held up behind the flood (their latency,
// enqueue → arrival, stays near what it is without the flooder); the global
// cap holds. On both backends, with three replicas.
func TestTenantLimits(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) {
			base := tenantRun(t, backend, false)
			flood := tenantRun(t, backend, true)
			for _, who := range []string{"b", "c"} {
				t.Logf("%s: tenant %s latency p50/p99/max without the flooder %s, with it %s",
					backend, who, base.latText(who), flood.latText(who))
				// The flood must not queue them (behind 5,000 jobs at 50/s
				// they would wait up to 100s): the flooder keeps the global
				// schedule booked one horizon ahead, so their jobs wait
				// about one horizon (50ms) for a slot granted to them, and
				// a loaded machine adds to that; their p99 stays within
				// half a second of what it is without the flooder.
				if got, bound := flood.p(who, 0.99), base.p(who, 0.99)+tenantSlack; got > bound {
					t.Errorf("tenant %s: p99 latency %s with the flooder; want at most %s (p99 without it %s + 500ms)",
						who, got, bound, base.p(who, 0.99))
				}
			}
		})
	}
}

const (
	tenantCap      = 300.0
	tenantRate     = 50.0
	tenantSlack    = 500 * time.Millisecond // what the flood may add to the others' p99
	tenantSteady   = 20                     // jobs/s of each of the steady tenants
	tenantFlood    = 5000
	floodCost      = 2 // slots each of the flooder's jobs costs
	tenantReplicas = 3
	tenantFor      = 8 * time.Second // how long the steady tenants send
)

// tenantResult is one run: arrivals by tenant, and latencies.
type tenantResult struct {
	times map[string][]time.Time     // arrival times by tenant, sorted
	lat   map[string][]time.Duration // enqueue → arrival by tenant, sorted
}

func (r tenantResult) p(who string, q float64) time.Duration {
	l := r.lat[who]
	if len(l) == 0 {
		return 0
	}
	return l[min(len(l)-1, int(q*float64(len(l))))]
}

func (r tenantResult) latText(who string) string {
	l := r.lat[who]
	if len(l) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s/%s/%s", r.p(who, 0.5).Round(time.Millisecond), r.p(who, 0.99).Round(time.Millisecond), l[len(l)-1].Round(time.Millisecond))
}

// tenantRun runs tenants b and c at 20/s each for tenantFor, with the
// flood of tenant "flood" enqueued first when flood is set, and checks the
// per-tenant and global bounds.
func tenantRun(t *testing.T, backend string, flood bool) tenantResult {
	t.Helper()
	var res tenantResult
	t.Run(fmt.Sprintf("flood=%v", flood), func(t *testing.T) {
		c := newCluster(t, backend, tenantCap, fmt.Sprintf("SLUICE_PACER_TENANTS_DEFAULT_RATE=%g", tenantRate))
		if flood {
			c.enqueueCost("flood", "flood", tenantFlood, floodCost)
		}
		c.start(tenantReplicas)
		if flood { // the flood is under way
			eventually(t, 30*time.Second, "the flood reaching the provider", func() bool { return c.delivered() >= 50 })
		}
		steadyIDs := c.enqueueSteady(t, []string{"b", "c"}, tenantSteady, tenantFor)
		eventually(t, 30*time.Second, "every steady job delivered", func() bool {
			return c.deliveredAll(steadyIDs)
		})
		end := time.Now()
		arr := c.prov.Arrivals()
		res = tenantResultOf(arr)
		all := arrivalTimes(arr)
		n1s, at1s := busiest(all, time.Second)
		n100, at100 := busiest(all, 100*time.Millisecond)
		p := promiseOf(t, tenantCap, c.env)
		t.Logf("all tenants: %d arrivals; busiest 1s %d (bound %d), busiest 100ms %d (bound %d)", len(all), n1s, p.max1s(), n100, p.max100ms())
		if n1s > p.max1s() || n100 > p.max100ms() {
			t.Errorf("global cap: busiest 1s %d from %s, 100ms %d from %s; want at most %d and %d",
				n1s, at1s.Format("15:04:05.000"), n100, at100.Format("15:04:05.000"), p.max1s(), p.max100ms())
		}
		for who, ts := range res.times {
			// In slots, as the cap: rate × W + one job's cost (the slots
			// a job spends before the one it goes on).
			cost := 1
			if who == "flood" {
				cost = floodCost
			}
			n, at := busiest(ts, time.Second)
			n100, _ := busiest(ts, 100*time.Millisecond)
			t.Logf("tenant %s: %d arrivals of cost %d; busiest 1s %d, busiest 100ms %d", who, len(ts), cost, n, n100)
			if lim := (int(tenantRate) + cost) / cost; n > lim {
				t.Errorf("tenant %s: %d arrivals of cost %d in the 1s from %s; want at most %d (its rate + one job, in slots)",
					who, n, cost, at.Format("15:04:05.000"), lim)
			}
			// Over 100ms, the jobs whose earlier slots fell before the
			// window: one per replica waiting for its tenant's slots.
			if lim := (int(tenantRate/10) + 1 + (cost-1)*tenantReplicas) / cost; n100 > lim {
				t.Errorf("tenant %s: %d arrivals of cost %d in one 100ms; want at most %d", who, n100, cost, lim)
			}
		}
		if flood {
			// Over the steady tenants' run the flooder got about its rate
			// in slots: the limit does not starve it (98% of 50/s with
			// headroom).
			start, stop := end.Add(-tenantFor), end
			got := float64(floodCost*len(within(res.times["flood"], start, stop))) / stop.Sub(start).Seconds()
			t.Logf("flooder: %.1f slots/s while the others sent", got)
			if got < 0.7*tenantRate {
				t.Errorf("flooder: %.1f slots/s while the others sent; want at least 70%% of its rate %g/s", got, tenantRate)
			}
		}
		if m, err := scrapeAll(c); err == nil {
			t.Logf("replicas: forfeited %s", m.forfeitText())
		}
	})
	return res
}

// tenantResultOf sorts the arrivals by tenant, the job id's prefix.
func tenantResultOf(arr []mockprovider.Arrival) tenantResult {
	r := tenantResult{times: map[string][]time.Time{}, lat: map[string][]time.Duration{}}
	for _, a := range arr {
		who, _, ok := strings.Cut(a.JobID, "-")
		if !ok {
			continue
		}
		r.times[who] = append(r.times[who], a.At)
		if !a.EnqueuedAt.IsZero() && a.Attempt == 1 {
			r.lat[who] = append(r.lat[who], a.At.Sub(a.EnqueuedAt))
		}
	}
	for who := range r.times {
		slices.SortFunc(r.times[who], time.Time.Compare)
		slices.Sort(r.lat[who])
	}
	return r
}

// enqueueSteady enqueues one job per user every 1/perSecond for d, each
// job's id the user, '-', and a number, and returns the ids.
func (c *cluster) enqueueSteady(t *testing.T, users []string, perSecond int, d time.Duration) []string {
	t.Helper()
	var (
		mu  sync.Mutex
		ids []string
	)
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	stop := time.Now().Add(d)
	for i := 0; time.Now().Before(stop); i++ {
		<-tick.C
		for _, u := range users {
			id := fmt.Sprintf("%s-%05d", u, i)
			j := &queue.Job{ID: id, User: u, Payload: json.RawMessage(`{"text":"hi"}`)}
			j.Lane = c.prio.Route(j)
			if _, err := c.q.Enqueue(context.Background(), j); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		}
	}
	return ids
}

// deliveredAll reports whether every id was delivered.
func (c *cluster) deliveredAll(ids []string) bool {
	done := map[string]bool{}
	for _, a := range c.prov.Arrivals() {
		if a.Delivered() {
			done[a.JobID] = true
		}
	}
	for _, id := range ids {
		if !done[id] {
			return false
		}
	}
	return true
}
