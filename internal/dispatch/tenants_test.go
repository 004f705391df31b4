package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// userJobs makes deliveries of lane's jobs, each "user:id".
func userJobs(q *memQueue, lane string, specs ...string) []queue.Delivery {
	var ds []queue.Delivery
	for _, s := range specs {
		user, id, _ := cutColon(s)
		j := job(id, lane, "x")
		j.User = user
		ds = append(ds, &memDelivery{q: q, job: j})
	}
	return ds
}

func cutColon(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

// tenantStub is the pacer's tenant side: rates by tenant.
type tenantStub struct {
	rates  map[string]float64
	unused int
}

func (s *tenantStub) TenantsOn() bool                             { return true }
func (s *tenantStub) TenantRate(t string) float64                 { return s.rates[t] }
func (s *tenantStub) SetTenantDemand(func() []pacer.TenantDemand) {}
func (s *tenantStub) Unused(pacer.Slot)                           { s.unused++ }
func (s *tenantStub) TakeFor(context.Context, string, int, time.Duration) (pacer.Slot, error) {
	return pacer.Slot{}, errors.New("tenantStub: no slots")
}

// At slot time the job picked is the first, in priority order, that the
// slot allows: a limited tenant's job only on its tenant's slot, any other
// job on any slot; the jobs passed over keep their places.
func TestPickAllowed(t *testing.T) {
	prio := priority.Config{Lanes: []priority.Lane{{Name: "vip"}, {Name: "default"}}}
	b, _ := newTestBuffer(t, prio)
	q := newMemQueue("vip", "default")
	now := time.Now()
	b.stock(0, userJobs(q, "vip", "flood:v1"), now)
	b.stock(1, userJobs(q, "default", "flood:f1", "flood:f2", "b:b1", ":anon1", "flood:f3", "b:b2"), now)
	e := &Engine{buf: b, tenants: &tenantStub{rates: map[string]float64{"flood": 50, "b": 50}}}
	cases := []struct {
		tenant string // the slot's
		want   string // the job id picked; "" for none
	}{
		{"b", "b1"},     // flood's jobs are passed over, in both lanes
		{"", "anon1"},   // no tenant: only a job without a limited tenant
		{"flood", "v1"}, // the vip lane first
		{"flood", "f1"}, // then the default lane's first flood job
		{"", ""},        // nothing allowed: the slot goes unused
		{"b", "b2"},     // past f2 and f3
		{"other", ""},   // a tenant with no job here
		{"flood", "f2"}, // order kept within the tenant
	}
	for i, c := range cases {
		d, ok := b.pickAllowed(func(j *queue.Job) bool { return e.allowed(j, pacer.Slot{Tenant: c.tenant}) })
		got := ""
		if ok {
			got = d.Job().ID
		}
		if got != c.want {
			t.Errorf("pick %d on a slot of %q: got %q, want %q", i, c.tenant, got, c.want)
		}
	}
	if got := b.tenantCounts(); got["flood"] != 1 || len(got) != 1 {
		t.Errorf("left: %v; want flood 1 (f3)", got)
	}
}

// Each tenant's deferred jobs come due one every interval after the
// soonest, per tenant.
func TestDeferralsSpacing(t *testing.T) {
	var f deferrals
	now := time.Unix(1000, 0)
	var got []time.Duration
	for range 3 {
		got = append(got, f.due("a", now, 500*time.Millisecond, 80*time.Millisecond))
	}
	got = append(got, f.due("b", now, 500*time.Millisecond, 80*time.Millisecond))
	got = append(got, f.due("a", now.Add(2*time.Second), 500*time.Millisecond, 80*time.Millisecond))
	want := []time.Duration{500 * time.Millisecond, 580 * time.Millisecond, 660 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
}

// deferQueue is a memQueue whose deliveries can be deferred.
type deferDelivery struct {
	*memDelivery
	mu       *sync.Mutex
	deferred *[]time.Duration
}

func (d deferDelivery) Defer(_ context.Context, delay time.Duration) error {
	d.mu.Lock()
	*d.deferred = append(*d.deferred, delay)
	d.mu.Unlock()
	d.settle("defer", "", delay)
	return nil
}

// A replica holds a limited tenant's jobs up to its share of the tenant's
// rate for the lookahead and defers the rest, spaced at the tenant's rate;
// other tenants' jobs are all kept.
func TestDeferExcess(t *testing.T) {
	prio := priority.Config{Lanes: []priority.Lane{{Name: "default"}}}
	b, _ := newTestBuffer(t, prio)
	q := newMemQueue("default")
	var deferred []time.Duration
	var mu sync.Mutex
	var ds []queue.Delivery
	for _, d := range userJobs(q, "default", "flood:1", "flood:2", "flood:3", "flood:4", "flood:5", "b:1", ":x") {
		ds = append(ds, deferDelivery{memDelivery: d.(*memDelivery), mu: &mu, deferred: &deferred})
	}
	now := time.Unix(1000, 0)
	cfg := Config{Lookahead: 100 * time.Millisecond, Now: func() time.Time { return now }}
	cfg.SetDefaults()
	e := &Engine{cfg: cfg, buf: b, tenants: &tenantStub{rates: map[string]float64{"flood": 20, "b": 20}},
		deferSem: make(chan struct{}, maxDefersInFlight)}
	e.log = slog.New(slog.DiscardHandler)
	e.replicas.Store(1)
	// hold: max(2, ceil(20 × 0.1)) = 2 flood jobs.
	kept := e.deferExcess(context.Background(), ds)
	e.deferWG.Wait()
	slices.Sort(deferred) // deferred in the background
	if got, want := ids(kept), []string{"1", "2", "1", "x"}; !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	if want := []time.Duration{100 * time.Millisecond, 150 * time.Millisecond, 200 * time.Millisecond}; !slices.Equal(deferred, want) {
		t.Errorf("deferred with delays %v, want %v (one every 1/20s from the lookahead)", deferred, want)
	}
}

// A limited tenant's job that costs 3 spends 3 of its tenant's slots, on a
// real pacer and Redis: a tenant limited to 20/s sends at most 8 such jobs
// in any second (20 slots + the 2 before the first job's last), where
// counting requests it would send 20; and jobs of no limited tenant go out
// meanwhile, not held up behind the tenant's.
func TestTenantJobCostsItsTenantSlots(t *testing.T) {
	rs := testredis.Start(t, testredis.Options{})
	p, err := pacer.New(rs.Client(), pacer.Config{Name: "tenant-cost", Rate: 200,
		Tenants: pacer.Tenants{Rates: map[string]float64{"t": 20}}})
	if err != nil {
		t.Fatal(err)
	}
	q := newMemQueue("default")
	var (
		mu   sync.Mutex
		sent = map[string][]time.Time{}
	)
	s := sink.SenderFunc(func(_ context.Context, j *queue.Job) error {
		mu.Lock()
		sent[j.User] = append(sent[j.User], time.Now())
		mu.Unlock()
		return nil
	})
	e, err := New(Config{}, Deps{Queue: q, Pacer: p, Sink: s, Priority: priority.Config{Lanes: []priority.Lane{{Name: "default"}}}})
	if err != nil {
		t.Fatal(err)
	}
	const tenantJobs, others = 12, 20
	for i := range tenantJobs {
		j := job(fmt.Sprintf("t%d", i), "default", "x")
		j.User, j.Cost = "t", 3
		q.Enqueue(context.Background(), j)
	}
	for i := range others {
		q.Enqueue(context.Background(), job(fmt.Sprintf("o%d", i), "default", "x"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	eventually(t, 30*time.Second, "every job settled", func() bool { return q.settledCount() == tenantJobs+others })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	ts, os := sent["t"], sent[""]
	if len(ts) != tenantJobs || len(os) != others {
		t.Fatalf("sent %d of the tenant's jobs and %d others; want %d and %d", len(ts), len(os), tenantJobs, others)
	}
	most := 0
	for i := range ts {
		n := 0
		for _, at := range ts[i:] {
			if at.Sub(ts[i]) < time.Second {
				n++
			}
		}
		most = max(most, n)
	}
	if most > 8 {
		t.Errorf("tenant t: %d jobs of cost 3 in one second; want at most 8 (20 slots/s)", most)
	}
	if last := os[len(os)-1]; !last.Before(ts[len(ts)/2]) {
		t.Errorf("the last job of no tenant went at %s, after half the tenant's (%s): held up behind them",
			last.Format("15:04:05.000"), ts[len(ts)/2].Format("15:04:05.000"))
	}
	t.Logf("tenant t: %d jobs of cost 3 over %s, at most %d in one second", len(ts), ts[len(ts)-1].Sub(ts[0]).Round(time.Millisecond), most)
}
