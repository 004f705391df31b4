package dispatch

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
)

// TenantLimits is the pacer's side of per-tenant limits (pacer.tenants);
// *pacer.Pacer has it. A job's tenant is its user. With limits on, the
// engine tells the pacer which tenants it holds jobs of, and when a slot
// comes it picks the first job, in priority order, that the slot allows:
// a job of a limited tenant only on a slot granted to its tenant, any
// other job on any slot. A slot that no held job may take is forfeited
// (Unused), never spent on a tenant over its limit.
type TenantLimits interface {
	// TenantsOn reports whether any tenant limit is configured.
	TenantsOn() bool
	// TenantRate is the rate tenant is limited to; 0 when it is not.
	TenantRate(tenant string) float64
	// SetTenantDemand tells the pacer where to learn which tenants this
	// replica holds jobs of.
	SetTenantDemand(f func() []pacer.TenantDemand)
	// Unused forfeits a slot that no held job was allowed to take.
	Unused(s pacer.Slot)
	// TakeFor takes n more slots granted to tenant, for a job of the
	// tenant that costs more than one, and returns the last, on which the
	// job is sent (see pacer.Pacer.TakeFor).
	TakeFor(ctx context.Context, tenant string, n int, ahead time.Duration) (pacer.Slot, error)
}

var _ TenantLimits = (*pacer.Pacer)(nil)

// tenantLimits returns the pacer's tenant limits when they are on, else
// nil: without them the engine does nothing of this file.
func tenantLimits(p Pacer) TenantLimits {
	if tl, ok := p.(TenantLimits); ok && tl.TenantsOn() {
		return tl
	}
	return nil
}

// allowed reports whether j may go on slot: its tenant is not limited, or
// the slot is granted to it.
func (e *Engine) allowed(j *queue.Job, slot pacer.Slot) bool {
	return j.User == "" || j.User == slot.Tenant || e.tenants.TenantRate(j.User) == 0
}

// tenantDemand counts the slots the held jobs need per tenant, for the
// pacer's next call.
func (b *laneBuffer) tenantDemand() []pacer.TenantDemand {
	counts := b.tenantCounts()
	out := make([]pacer.TenantDemand, 0, len(counts))
	for t, n := range counts {
		out = append(out, pacer.TenantDemand{Tenant: t, Slots: n})
	}
	return out
}

// tenantCounts counts the slots the held jobs cost per user (jobs without
// one left out): a tenant's limit counts slots, as the cap does.
func (b *laneBuffer) tenantCounts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	counts := map[string]int{}
	for _, l := range b.lanes {
		for _, h := range l {
			if j := h.d.Job(); j.User != "" {
				counts[j.User] += max(j.Cost, 1)
			}
		}
	}
	return counts
}

// pickAllowed is pick among the jobs ok allows: the scheduler chooses
// among the lanes holding such a job, and the first such job of that lane
// is removed and returned. Jobs ok refuses keep their places. It returns
// false when no held job is allowed.
func (b *laneBuffer) pickAllowed(ok func(*queue.Job) bool) (queue.Delivery, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ready := b.ready[:0]
	first := make([]int, len(b.lanes))
	for i, l := range b.lanes {
		first[i] = -1
		for k, h := range l {
			if ok(h.d.Job()) {
				first[i] = k
				break
			}
		}
		ready = append(ready, first[i] >= 0)
	}
	i, found := b.sched.Next(ready)
	if !found {
		return nil, false
	}
	k := first[i]
	d := b.lanes[i][k].d
	b.lanes[i] = append(b.lanes[i][:k], b.lanes[i][k+1:]...)
	b.room.Broadcast()
	return d, true
}

// deferrals spaces the jobs a replica defers per tenant: each tenant's
// deferred jobs come due one every replicas/rate seconds, so that the
// cluster gets them back at about the rate their tenant may send.
type deferrals struct {
	mu   sync.Mutex
	next map[string]time.Time // when the tenant's next deferred job comes due
}

// maxDeferralTenants bounds the tenants remembered; those whose jobs are
// all due are forgotten first.
const maxDeferralTenants = 1024

// due returns the delay of tenant's next deferred job at now: no sooner
// than soonest, and every after the previous one.
func (f *deferrals) due(tenant string, now time.Time, soonest, every time.Duration) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == nil {
		f.next = map[string]time.Time{}
	}
	if len(f.next) >= maxDeferralTenants {
		for t, at := range f.next {
			if at.Before(now) {
				delete(f.next, t)
			}
		}
	}
	at := f.next[tenant]
	if at.Before(now.Add(soonest)) {
		at = now.Add(soonest)
	}
	f.next[tenant] = at.Add(every)
	return at.Sub(now)
}

// tenantHold is how many jobs of a tenant limited to rate this replica
// holds: its share of the rate for Lookahead, at least 2.
func (e *Engine) tenantHold(rate float64) int {
	share := rate / float64(max(e.replicas.Load(), 1))
	return max(2, int(math.Ceil(share*e.cfg.Lookahead.Seconds())))
}

// deferExcess defers, back into the queue, the fetched jobs of limited
// tenants beyond what this replica holds of each (tenantHold), so that a
// tenant over its limit does not fill the lane and hold up the jobs of
// other tenants behind it in the queue. It returns the jobs to keep. A
// delivery that cannot be deferred (queue.Deferrer) is kept.
func (e *Engine) deferExcess(ctx context.Context, ds []queue.Delivery) []queue.Delivery {
	counts := e.buf.tenantCounts()
	now := e.cfg.Now()
	keep := ds[:0]
	for _, d := range ds {
		j := d.Job()
		rate := 0.0
		if j.User != "" {
			rate = e.tenants.TenantRate(j.User)
		}
		df, ok := d.(queue.Deferrer)
		if rate <= 0 || !ok || counts[j.User] < e.tenantHold(rate) {
			counts[j.User] += max(j.Cost, 1)
			keep = append(keep, d)
			continue
		}
		every := time.Duration(float64(max(e.replicas.Load(), 1)) / rate * float64(time.Second))
		delay := e.defers.due(j.User, now, e.cfg.Lookahead, every)
		e.deferred.Store(true)
		e.deferAsync(ctx, df, j, delay)
	}
	return keep
}

// maxDefersInFlight bounds the Defer calls open at once.
const maxDefersInFlight = 32

// deferAsync defers one job in the background, so that the fetch loop
// gets past a flood quickly; Run waits for the defers before it returns.
func (e *Engine) deferAsync(ctx context.Context, df queue.Deferrer, j *queue.Job, delay time.Duration) {
	e.deferSem <- struct{}{}
	e.deferWG.Go(func() {
		defer func() { <-e.deferSem }()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		e.settled(j, "defer", df.Defer(sctx, delay))
		e.log.Debug("dispatch: tenant over its limit; job deferred", "job", j.ID, "tenant", j.User, "in", delay)
	})
}

// fetchSize is how many jobs lane fetching asks for, wanting want: a fetch
// chunk, or all it wants while jobs are being deferred (a flood is being
// passed over).
func (e *Engine) fetchSize(want, replicas int) int {
	if e.tenants != nil && e.deferred.Swap(false) {
		return want
	}
	return min(want, e.cfg.fetchChunk(replicas))
}

// limited reports whether j's further slots must be its tenant's: j is of
// a limited tenant and was picked on its tenant's slot.
func (e *Engine) limited(j *queue.Job, slot pacer.Slot) bool {
	return e.tenants != nil && j.User != "" && slot.Tenant == j.User
}

// sendForTenant takes the n further slots a job of a limited tenant costs
// among its tenant's slots (TakeFor), then sends it on the last, in a
// goroutine of its own: the tenant's slots come at the tenant's rate, and
// the slot loop serves the others meanwhile. The job keeps its room in
// flight and its permit (release) until it is settled. When the slots
// cannot be had (shutdown, Redis away), the job goes back to the front of
// its lane.
func (e *Engine) sendForTenant(ctx, sendCtx context.Context, d queue.Delivery, n int, release func()) {
	e.sends.Add(1)
	go func() {
		defer e.sends.Done()
		defer func() { <-e.inflight }()
		defer release()
		waiting := e.sending.add(d) // kept alive while it waits for its slots
		slot, err := e.tenants.TakeFor(ctx, d.Job().User, n, e.ahead)
		e.sending.remove(waiting)
		if err != nil {
			if ctx.Err() == nil {
				e.backendError("pacer", err)
			}
			e.putBack(d)
			return
		}
		e.send(sendCtx, d, slot)
	}()
}
