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
	var held []slot
	for {
		if err := ctx.Err(); err != nil {
			p.giveBack(held)
			return Slot{}, fmt.Errorf("pacer: take for %s: %w", tenant, err)
		}
		var err error
		if held, err = p.claimFor(ctx, tenant, n, held); err != nil {
			return Slot{}, err
		}
		last := held[len(held)-1]
		now := p.cfg.Clock.Now()
		early := p.aheadOf(ahead)
		woke, err := p.waitFor(ctx, last.local.Add(-early), now, early <= 0)
		if err != nil {
			p.giveBack(held)
			return Slot{}, fmt.Errorf("pacer: take for %s: %w", tenant, err)
		}
		s := Slot{At: last.local, Deadline: last.local.Add(p.cfg.MaxLateness), Stamp: last.stamp, Tenant: tenant}
		if s.Late(woke) { // never spend it late: the tenant's slots are lost
			p.late.Add(int64(n))
			held = held[:0]
			continue
		}
		p.used.Add(int64(n))
		return s, nil
	}
}

// claimFor takes tenant's buffered slots into held until it holds n,
// refilling from Redis while it has fewer. A refill that brings the
// tenant none waits one of the tenant's intervals before the next.
func (p *Pacer) claimFor(ctx context.Context, tenant string, n int, held []slot) ([]slot, error) {
	for {
		p.mu.Lock()
		now := p.cfg.Clock.Now()
		p.dropExpiredLocked(now)
		for i := 0; i < len(p.buf) && len(held) < n; {
			if p.buf[i].tenant != tenant {
				i++
				continue
			}
			held = append(held, p.buf[i])
			p.buf = slices.Delete(p.buf, i, i+1)
		}
		if len(held) == n {
			p.mu.Unlock()
			return held, nil
		}
		if err := p.moreLocked(ctx, now, n-len(held)); err != nil {
			p.giveBack(held)
			return nil, err
		}
		if !p.holdsFor(tenant) {
			if err := p.sleepFor(ctx, p.tenantPoll(tenant)); err != nil {
				p.giveBack(held)
				return nil, fmt.Errorf("pacer: take for %s: %w", tenant, err)
			}
		}
	}
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

// takeLocked moves buffered slots into held, in order, until it holds n,
// passing over the slots of tenants whose TakeFor callers wait for them.
// p.mu must be held.
func (p *Pacer) takeLocked(held []slot, n int) []slot {
	if len(p.owed) == 0 {
		take := min(n-len(held), len(p.buf))
		held = append(held, p.buf[:take]...)
		p.buf = p.buf[take:]
		return held
	}
	kept := p.buf[:0]
	for _, s := range p.buf {
		if len(held) < n && (s.tenant == "" || p.owed[s.tenant] == 0) {
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
