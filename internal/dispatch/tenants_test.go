package dispatch

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
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
