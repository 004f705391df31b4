package pacer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
)

// demandOf returns a fixed tenant demand.
func demandOf(ds ...TenantDemand) func() []TenantDemand {
	return func() []TenantDemand { return slices.Clone(ds) }
}

// Each granted slot goes to at most one tenant, the one longest due whose
// own schedule allows it; a tenant gets one slot per tenant interval, and
// slots no tenant may take go to nobody. The global grant is unchanged.
func TestTenantTimeline(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 100, Horizon: 50 * ms,
		Tenants: Tenants{Rates: map[string]float64{"a": 25, "b": 50}}})
	p.SetTenantDemand(demandOf(TenantDemand{"a", 10}, TenantDemand{"b", 10}, TenantDemand{"free", 3}))
	cases := []struct {
		at      time.Duration
		tenants []string // per granted slot, 10ms apart
	}{
		// Slots at 0, 10, …, 50ms: a and b are idle, a is first (ties go
		// to the first given); b next; a again 40ms later, b 20ms later.
		{0, []string{"a", "b", "", "b", "a", "b"}},
		// Slots at 60…110ms (granted at 60ms, to the horizon).
		{60 * ms, []string{"", "b", "a", "b", "", "b"}},
	}
	for i, c := range cases {
		m.SetTime(t0.Add(c.at))
		r, err := p.Reserve(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.SlotTenants, c.tenants) {
			t.Errorf("call %d at %s: slot tenants %q, want %q", i, c.at, r.SlotTenants, c.tenants)
		}
		if r.TenantRates["a"] != 25 || r.TenantRates["b"] != 50 || r.TenantRates["free"] != 0 {
			t.Errorf("call %d: tenant rates %v, want a 25, b 50, free 0", i, r.TenantRates)
		}
	}
	if got := p.TenantRate("free"); got != 0 {
		t.Errorf("TenantRate(free) = %v, want 0 (not limited)", got)
	}
}

// A tenant gets no more slots in one call than it has jobs waiting, and a
// tenant with a default rate is limited like a listed one.
func TestTenantTimelineDemandAndDefault(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 100, Horizon: 50 * ms, Tenants: Tenants{DefaultRate: 10}})
	p.SetTenantDemand(demandOf(TenantDemand{"x", 1}, TenantDemand{"y", 5}))
	m.SetTime(t0)
	r, err := p.Reserve(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"x", "y", "", "", "", ""}; !slices.Equal(r.SlotTenants, want) {
		t.Errorf("slot tenants %q, want %q", r.SlotTenants, want)
	}
}

// An operator's tenant rate overrides the configured one from the next
// call, and may limit a tenant the configuration does not; clearing it
// restores the configured rate.
func TestTenantOverride(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 100, Horizon: 50 * ms, Tenants: Tenants{Rates: map[string]float64{"a": 50}}})
	p.SetTenantDemand(demandOf(TenantDemand{"a", 10}, TenantDemand{"c", 10}))
	ctl := p.Controls()
	ctx := context.Background()
	if err := ctl.SetTenantRate(ctx, "a", 20); err != nil {
		t.Fatal(err)
	}
	if err := ctl.SetTenantRate(ctx, "c", 25); err != nil {
		t.Fatal(err)
	}
	m.SetTime(t0)
	r, err := p.Reserve(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	// a every 50ms, c every 40ms, from 0 (a first), c at 10ms.
	if want := []string{"a", "c", "", "", "", "a"}; !slices.Equal(r.SlotTenants, want) {
		t.Errorf("slot tenants %q, want %q", r.SlotTenants, want)
	}
	if p.TenantRate("a") != 20 || p.TenantRate("c") != 25 {
		t.Errorf("TenantRate a %v, c %v; want 20, 25", p.TenantRate("a"), p.TenantRate("c"))
	}
	got, err := ctl.TenantRates(ctx)
	if err != nil || got["a"] != 20 || got["c"] != 25 || len(got) != 2 {
		t.Errorf("TenantRates = %v, %v; want a 20, c 25", got, err)
	}
	if err := ctl.ClearTenantRate(ctx, ""); err != nil {
		t.Fatal(err)
	}
	m.SetTime(t0.Add(time.Second))
	if _, err := p.Reserve(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if p.TenantRate("a") != 50 || p.TenantRate("c") != 0 {
		t.Errorf("after clear: TenantRate a %v, c %v; want 50, 0", p.TenantRate("a"), p.TenantRate("c"))
	}
	if err := ctl.SetTenantRate(ctx, "a", 0); err == nil {
		t.Error("SetTenantRate(a, 0): no error, want one")
	}
}

// Without tenant limits the call carries no tenant and the reply none.
func TestTenantsOffCostNothing(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 100, Horizon: 50 * ms})
	p.SetTenantDemand(demandOf(TenantDemand{"a", 10}))
	m.SetTime(t0)
	r, err := p.Reserve(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if r.SlotTenants != nil || r.TenantRates != nil || p.TenantsOn() {
		t.Errorf("tenants off: slot tenants %q, rates %v, on %v; want none", r.SlotTenants, r.TenantRates, p.TenantsOn())
	}
	if m.Exists(tenantsKey("timeline")) {
		t.Error("tenants off: the tenants hash was written")
	}
}

// Several replicas on a real Redis share one tenant schedule: the stamps of
// the slots granted to a tenant, over all replicas, are at least one
// tenant interval apart, and the tenant gets about its rate.
func TestTenantSharedAcrossReplicas(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	cfg := Config{Name: "tenants", Rate: 500, Tenants: Tenants{Rates: map[string]float64{"a": 40}}}
	var (
		mu    sync.Mutex
		slots []time.Time
		all   int
	)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for range 3 {
		p := newClientPacer(t, srv, cfg)
		p.SetTenantDemand(demandOf(TenantDemand{"a", 50}))
		wg.Go(func() {
			for ctx.Err() == nil {
				s, err := p.Take(ctx, 1)
				if err != nil {
					continue
				}
				mu.Lock()
				all++
				if s.Tenant == "a" {
					slots = append(slots, s.Stamp)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(slots, func(a, b time.Time) int { return a.Compare(b) })
	interval := time.Duration(float64(time.Second) / (40 * (1 - p2(cfg))))
	for i := 1; i < len(slots); i++ {
		if gap := slots[i].Sub(slots[i-1]); gap < interval-time.Microsecond {
			t.Fatalf("tenant slots %d and %d are %s apart; want at least the tenant interval %s", i-1, i, gap, interval)
		}
	}
	// 1.5s at 39.2/s is about 58; the run includes start-up.
	if len(slots) < 40 || len(slots) > 60 {
		t.Errorf("tenant a got %d slots of %d in 1.5s; want 40..60 (rate 40/s)", len(slots), all)
	}
	t.Logf("tenant a: %d slots of %d", len(slots), all)
}

// p2 is the default headroom of cfg.
func p2(cfg Config) float64 { cfg.SetDefaults(); return cfg.Headroom }

// A job of a limited tenant that costs 3 spends 3 of its tenant's slots
// (TakeFor), on a real Redis: the slots TakeFor returns, one per job, are
// at least 3 tenant intervals apart; and while it waits, a caller taking
// any slot (the engine's slot loop) passes over the tenant's slots.
func TestTakeForSpendsTenantSlots(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	cfg := Config{Name: "takefor", Rate: 500, Tenants: Tenants{Rates: map[string]float64{"a": 40}}}
	p := newClientPacer(t, srv, cfg)
	p.SetTenantDemand(demandOf()) // only what TakeFor owes asks for the tenant's slots
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var (
		wg     sync.WaitGroup
		jobs   []time.Time // the slot each cost-3 job went on (Redis clock)
		stolen int         // tenant slots the other caller got
		others int
	)
	wg.Go(func() {
		for ctx.Err() == nil {
			s, err := p.TakeFor(ctx, "a", 3, 0)
			if err != nil {
				continue
			}
			if s.Tenant != "a" {
				t.Errorf("TakeFor(a) returned a slot of tenant %q", s.Tenant)
			}
			jobs = append(jobs, s.Stamp)
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			s, err := p.Take(ctx, 1)
			if err != nil {
				continue
			}
			others++
			if s.Tenant == "a" {
				stolen++
			}
		}
	})
	wg.Wait()
	interval := time.Duration(float64(time.Second) / (40 * (1 - p2(cfg))))
	for i := 1; i < len(jobs); i++ {
		if gap := jobs[i].Sub(jobs[i-1]); gap < 3*interval-time.Microsecond {
			t.Errorf("cost-3 jobs %d and %d went on slots %s apart; want at least 3 tenant intervals (%s)", i-1, i, gap, 3*interval)
		}
	}
	// 1.5s at 39.2 tenant slots/s is about 58 slots: 19 jobs of cost 3.
	if len(jobs) < 5 || len(jobs) > 20 {
		t.Errorf("%d cost-3 jobs of tenant a in 1.5s; want 5..20 (40 slots/s)", len(jobs))
	}
	// A tenant slot left over between two TakeFor calls may go to the
	// other caller; without passing over them it gets most of them.
	if stolen > 3 {
		t.Errorf("the other caller took %d of tenant a's slots; want at most 3", stolen)
	}
	t.Logf("tenant a: %d jobs of cost 3; the other caller: %d slots, %d of them tenant a's", len(jobs), others, stolen)
}

// Users who come once each, under a default tenant rate, do not pile up in
// the tenants hash while traffic keeps it alive: each call that writes a
// tat sweeps a sample of the hash for tats that have passed.
func TestTenantsHashForgetsIdleTenants(t *testing.T) {
	ctx := context.Background()
	p, m := newTimeline(t, Config{Rate: 1000, Horizon: 50 * ms, Tenants: Tenants{DefaultRate: 1000}})
	const users = 2000
	user := 0
	p.SetTenantDemand(func() []TenantDemand { return []TenantDemand{{fmt.Sprintf("u%d", user), 1}} })
	for ; user < users; user++ {
		m.SetTime(t0.Add(time.Duration(user) * 5 * ms))
		r, err := p.Reserve(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Granted != 1 || len(r.SlotTenants) != 1 || r.SlotTenants[0] == "" {
			t.Fatalf("call %d: granted %d to %q, want one slot to u%d", user, r.Granted, r.SlotTenants, user)
		}
	}
	fields, err := m.HKeys(tenantsKey("timeline"))
	n := len(fields)
	if err != nil {
		t.Fatal(err)
	}
	// Each call leaves one tat ahead (its own, 1ms on); the rest passed.
	if n > 64 {
		t.Errorf("tenants hash holds %d fields after %d one-time users, want at most 64", n, users)
	}
}
