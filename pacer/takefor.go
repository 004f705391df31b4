package pacer

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// A job of a limited tenant costs its tenant as many slots as it costs the
// cluster: the first is the slot the job was picked on (granted to its
// tenant), the others TakeFor claims among the slots granted to the
// tenant. While a TakeFor caller waits, the slots it needs count in its
// tenant's demand (withOwed), so that reserve.lua grants the tenant
// slots, and the tenant's buffered slots are kept for it: other claims
// pass over them (takeLocked). The count stays until TakeFor returns, so
// the demand may count the slots a caller already holds: a slot the
// tenant is granted beyond its need goes to another of its jobs, or to a
// job of no limited tenant.

// TakeFor is TakeAhead for n slots granted to tenant: the further slots
// of a job of a limited tenant whose cost is more than one. Its tenant is
// granted slots at its rate (Tenants), so a job of cost c spends c of the
// tenant's slots, as it spends c of the cluster's, and is sent on the last
// (the returned slot). Other callers do not take the tenant's slots while
// TakeFor waits for them. With an empty tenant it is TakeAhead.
func (p *Pacer) TakeFor(ctx context.Context, tenant string, n int, ahead time.Duration) (Slot, error) {
	if tenant == "" {
		return p.TakeAhead(ctx, n, ahead)
	}
	if n < 1 {
		return Slot{}, fmt.Errorf("pacer: take for %s: n must be at least 1, got %d", tenant, n)
	}
	p.owe(tenant, n)
	defer p.owe(tenant, -n)
	return p.take(ctx, tenant, n, ahead)
}

// owe adds d to the slots TakeFor callers wait for of tenant.
func (p *Pacer) owe(tenant string, d int) {
	if d == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.owed == nil {
		p.owed = map[string]int{}
	}
	if p.owed[tenant] += d; p.owed[tenant] <= 0 {
		delete(p.owed, tenant)
	}
}

// holdsFor reports whether a slot granted to tenant is buffered.
func (p *Pacer) holdsFor(tenant string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.buf, func(s slot) bool { return s.tenant == tenant })
}

// tenantPoll is how long TakeFor waits after a refill that granted its
// tenant nothing: about one of the tenant's intervals (its next slot is
// at least that far), within 1ms and half a horizon.
func (p *Pacer) tenantPoll(tenant string) time.Duration {
	d := p.cfg.Horizon / 2
	if r := p.TenantRate(tenant); r > 0 {
		d = min(d, time.Duration(float64(time.Second)/r))
	}
	return max(d, time.Millisecond)
}

// takeLocked moves buffered slots into held, in order, until it holds n:
// with a tenant, only slots granted to it; without, any slot but those of
// tenants whose TakeFor callers wait for them. p.mu must be held.
func (p *Pacer) takeLocked(held []slot, n int, tenant string) []slot {
	if tenant == "" && len(p.owed) == 0 {
		take := min(n-len(held), len(p.buf))
		held = append(held, p.buf[:take]...)
		p.buf = p.buf[take:]
		return held
	}
	kept := p.buf[:0]
	for _, s := range p.buf {
		mine := p.owed[s.tenant] == 0
		if tenant != "" {
			mine = s.tenant == tenant
		}
		if len(held) < n && mine {
			held = append(held, s)
			continue
		}
		kept = append(kept, s)
	}
	clear(p.buf[len(kept):])
	p.buf = kept
	return held
}

// withOwed adds the slots TakeFor callers wait for to the tenants'
// demand, the tenants of no held job included.
func (p *Pacer) withOwed(ds []TenantDemand) []TenantDemand {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.owed) == 0 {
		return ds
	}
	seen := make(map[string]bool, len(ds))
	for i := range ds {
		ds[i].Slots += p.owed[ds[i].Tenant]
		seen[ds[i].Tenant] = true
	}
	for t, n := range p.owed {
		if !seen[t] {
			ds = append(ds, TenantDemand{Tenant: t, Slots: n})
		}
	}
	return ds
}
