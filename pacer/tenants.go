package pacer

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Tenant limits: sub-limits under Rate, one per tenant (a job's user).
//
// A limited tenant has its own GCRA schedule in Redis, beside the global
// one (sluice:{name}:tenants), at its rate × (1 − Headroom) with no burst.
// It is never granted a slot of its own: in the same reserve.lua call that
// grants this replica its global slots, each of those slots is granted to
// at most one of the tenants this replica holds jobs of (SetTenantDemand),
// the one longest due whose schedule allows a request at that slot. The
// slot's Tenant says which. A job of a limited tenant may go only on a slot
// granted to its tenant; a job without a limited tenant may go on any slot.
// So a tenant's requests leave on global slots at least one tenant interval
// apart, each within MaxLateness of its slot: the tenant sees at most
// rate × W + 1 requests in any window W of 100ms or more (with the default
// headroom), as the cluster does; and the global schedule is the same with
// or without tenants, so the global bound holds unchanged.
//
// Without tenant limits configured (Tenants.On false) nothing of this runs:
// the call has one key and no tenant arguments, as before.

// Tenants configures the per-tenant limits. A tenant is a job's user; a job
// without a user has no tenant and only the global rate applies to it.
type Tenants struct {
	// DefaultRate is the rate of every tenant without a rate of its own in
	// Rates, requests per second. Zero means such tenants are not limited.
	DefaultRate float64 `yaml:"default_rate"`
	// Rates are tenants' own rates, requests per second. An operator's
	// override in Redis (Controls.SetTenantRate) takes precedence.
	Rates map[string]float64 `yaml:"rates"`
}

// On reports whether any tenant limit is configured. Operator overrides
// (SetTenantRate) apply only on replicas where it is on.
func (t Tenants) On() bool { return t.DefaultRate > 0 || len(t.Rates) > 0 }

// rate is the configured rate of tenant; 0 when not limited.
func (t Tenants) rate(tenant string) float64 {
	if tenant == "" {
		return 0
	}
	if r, ok := t.Rates[tenant]; ok {
		return r
	}
	return t.DefaultRate
}

func (t *Tenants) validate(bad func(key, format string, args ...any)) {
	if t.DefaultRate != 0 && !validRate(t.DefaultRate) {
		bad("tenants.default_rate", "must be 0 (no limit) or between %g and %d requests/s, got %v", MinRate, int(MaxRate), t.DefaultRate)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Rates)) {
		if r := t.Rates[name]; !validRate(r) {
			bad("tenants.rates."+name, "must be between %g and %d requests/s, got %v", MinRate, int(MaxRate), r)
		}
		if name == "" {
			bad("tenants.rates", "a tenant name must not be empty")
		}
	}
}

// TenantDemand is a tenant whose jobs this replica holds, waiting for
// slots, and how many slots they need: a job costs its Cost.
type TenantDemand struct {
	Tenant string
	Slots  int
}

// maxTenantsPerCall bounds the tenants one reserve call grants slots to:
// those with the most jobs waiting go first.
const maxTenantsPerCall = 32

// SetTenantDemand tells the pacer where to learn which tenants this
// replica holds jobs of, when it asks Redis for slots; f is called without
// the pacer's lock held, from any goroutine. Only with tenant limits on.
func (p *Pacer) SetTenantDemand(f func() []TenantDemand) { p.demand.Store(&f) }

// TenantsOn reports whether tenant limits are configured.
func (p *Pacer) TenantsOn() bool { return p.cfg.Tenants.On() }

// TenantRate returns the rate tenant is limited to, as the last reply from
// Redis said (an operator's override included), else as configured; 0 when
// the tenant is not limited.
func (p *Pacer) TenantRate(tenant string) float64 {
	if tenant == "" || !p.cfg.Tenants.On() {
		return 0
	}
	p.tenantMu.Lock()
	r, ok := p.tenantRates[tenant]
	p.tenantMu.Unlock()
	if ok {
		return r
	}
	return p.cfg.Tenants.rate(tenant)
}

// tenantArgs returns the keys and arguments reserve.lua takes for the
// tenants waiting on this replica, and their names in order; nil without
// tenant limits or demand.
func (p *Pacer) tenantArgs() (keys []string, args []any, names []string) {
	fp := p.demand.Load()
	if !p.cfg.Tenants.On() || fp == nil || *fp == nil {
		return nil, nil, nil
	}
	// The tenants' demand with the slots TakeFor callers still wait for.
	ds := p.withOwed((*fp)())
	ds = slices.DeleteFunc(ds, func(d TenantDemand) bool { return d.Tenant == "" || d.Slots < 1 })
	if len(ds) == 0 {
		return nil, nil, nil
	}
	if len(ds) > maxTenantsPerCall {
		slices.SortStableFunc(ds, func(a, b TenantDemand) int { return b.Slots - a.Slots })
		ds = ds[:maxTenantsPerCall]
	}
	args = append(args, len(ds))
	for _, d := range ds {
		args = append(args, d.Tenant, p.cfg.Tenants.rate(d.Tenant), d.Slots)
		names = append(names, d.Tenant)
	}
	return []string{tenantsKey(p.cfg.Name), tenantRatesKey(p.cfg.Name)}, args, names
}

// parseTenants reads the tenant fields of a reply: each tenant's rate, and
// the tenant each granted slot is for.
func parseTenants(rates, assigned string, names []string, granted int) (map[string]float64, []string, error) {
	rs := strings.Split(rates, ",")
	if len(rs) != len(names) {
		return nil, nil, fmt.Errorf("%w: %d tenant rates for %d tenants", ErrBadReply, len(rs), len(names))
	}
	out := make(map[string]float64, len(names))
	for i, s := range rs {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: tenant rate %q", ErrBadReply, s)
		}
		out[names[i]] = r
	}
	if granted == 0 {
		return out, nil, nil
	}
	as := strings.Split(assigned, ",")
	if len(as) != granted {
		return nil, nil, fmt.Errorf("%w: %d slot tenants for %d slots", ErrBadReply, len(as), granted)
	}
	slots := make([]string, granted)
	for i, s := range as {
		k, err := strconv.Atoi(s)
		if err != nil || k < 0 || k > len(names) {
			return nil, nil, fmt.Errorf("%w: slot tenant %q", ErrBadReply, s)
		}
		if k > 0 {
			slots[i] = names[k-1]
		}
	}
	return out, slots, nil
}

// noteTenantRates records the tenants' rates a reply reported.
func (p *Pacer) noteTenantRates(rates map[string]float64) {
	if len(rates) == 0 {
		return
	}
	p.tenantMu.Lock()
	defer p.tenantMu.Unlock()
	if p.tenantRates == nil || len(p.tenantRates) > 4096 {
		p.tenantRates = map[string]float64{} // forget tenants long gone
	}
	maps.Copy(p.tenantRates, rates)
}

// Unused records that a slot came with no job allowed to take it (every
// job this replica held was of tenants over their limits): the slot is
// forfeited, never spent on a tenant over its limit.
func (p *Pacer) Unused(Slot) { p.ineligible.Add(1) }
