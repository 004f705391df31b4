package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// backendError records a failure of a component ("queue", "pacer").
func (e *Engine) backendError(component string, err error) {
	e.metrics.backendError(component)
	e.healthMu.Lock()
	first := e.health[component] == nil
	e.health[component] = err
	if e.failedAt == nil {
		e.failedAt = map[string]time.Time{}
	}
	e.failedAt[component] = e.cfg.Now()
	e.healthMu.Unlock()
	if first {
		e.log.Warn("dispatch: backend error", "component", component, "err", err)
	}
}

// CountBackendError counts a failed call to a component ("pacer") made
// outside the engine, in sluice_backend_errors_total: the replica's
// heartbeat, which an idle replica still makes when none of its own loops
// calls the pacer. It leaves readiness to the engine's calls and probes (a
// replica pacing itself while Redis is away is still ready).
func (e *Engine) CountBackendError(component string) { e.metrics.backendError(component) }

// setHealthy records that a component answered.
func (e *Engine) setHealthy(component string) {
	e.healthMu.Lock()
	recovered := e.health[component] != nil
	e.health[component] = nil
	if recovered && e.recovered != nil {
		close(e.recovered) // wakes every loop in retrySleep
		e.recovered = nil
	}
	e.healthMu.Unlock()
	if recovered {
		e.log.Info("dispatch: backend recovered", "component", component)
	}
}

// recoverAfter is how long a component's last error counts against
// readiness once a probe of it answers again: longer than the engine's
// retry delay after a failure, so that a component that still fails on
// every call stays not ready, and short, so that an idle replica (which
// makes no call that could clear the error) is ready soon after its
// backend is back.
const recoverAfter = time.Second

// Probe is a check of one component ("pacer", say) that Ready runs: nil
// when the component answers now.
type Probe struct {
	Component string
	Check     func(ctx context.Context) error
}

// Ready reports whether the replica can work: the queue answers now (a
// Stats call), each probe passes, it does not stand aside (Pacer.Aside),
// and no component's last call failed. A
// component whose probe passes (the queue's is Stats) and whose last error
// is older than a second counts as recovered, so that readiness follows
// the backend and not the next job.
func (e *Engine) Ready(ctx context.Context, probes ...Probe) error {
	probes = append([]Probe{{Component: "queue", Check: func(ctx context.Context) error {
		_, err := e.q.Stats(ctx)
		return err
	}}}, probes...)
	var errs []error
	for _, p := range probes {
		if err := p.Check(ctx); err != nil {
			errs = append(errs, fmt.Errorf("dispatch: %s: %w", p.Component, err))
			continue
		}
		e.recoverIfStale(p.Component)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if why := e.asideWhy.Load(); why != nil && e.standing.Load() {
		return fmt.Errorf("dispatch: pacer: %w", *why)
	}
	e.healthMu.Lock()
	defer e.healthMu.Unlock()
	for c, err := range e.health {
		if err != nil {
			errs = append(errs, fmt.Errorf("dispatch: %s: %w", c, err))
		}
	}
	return errors.Join(errs...)
}

// recoverIfStale clears the component's last error when a probe of it
// passed and the error is older than recoverAfter.
func (e *Engine) recoverIfStale(component string) {
	e.healthMu.Lock()
	stale := e.health[component] != nil && e.cfg.Now().Sub(e.failedAt[component]) >= recoverAfter
	e.healthMu.Unlock()
	if stale {
		e.setHealthy(component)
	}
}

// InFlight returns the number of requests open to the provider.
func (e *Engine) InFlight() int { return int(e.open.Load()) }

// SetReplicas tells the engine how many replicas share the rate (the live
// ones, itself included), so that each fetches only its share of the jobs
// ahead of their slots. The default is 1.
func (e *Engine) SetReplicas(n int) { e.replicas.Store(int64(max(n, 1))) }
