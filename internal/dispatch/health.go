package dispatch

import (
	"context"
	"errors"
	"fmt"
)

// backendError records a failure of a component ("queue", "pacer").
func (e *Engine) backendError(component string, err error) {
	e.metrics.backendError(component)
	e.healthMu.Lock()
	first := e.health[component] == nil
	e.health[component] = err
	e.healthMu.Unlock()
	if first {
		e.log.Warn("dispatch: backend error", "component", component, "err", err)
	}
}

// setHealthy records that a component answered.
func (e *Engine) setHealthy(component string) {
	e.healthMu.Lock()
	recovered := e.health[component] != nil
	e.health[component] = nil
	e.healthMu.Unlock()
	if recovered {
		e.log.Info("dispatch: backend recovered", "component", component)
	}
}

// Ready reports whether the replica can work: the queue answers now
// (a Stats call) and no component's last call failed.
func (e *Engine) Ready(ctx context.Context) error {
	if _, err := e.q.Stats(ctx); err != nil {
		return fmt.Errorf("dispatch: queue: %w", err)
	}
	e.healthMu.Lock()
	defer e.healthMu.Unlock()
	var errs []error
	for c, err := range e.health {
		if err != nil {
			errs = append(errs, fmt.Errorf("dispatch: %s: %w", c, err))
		}
	}
	return errors.Join(errs...)
}

// InFlight returns the number of requests open to the provider.
func (e *Engine) InFlight() int { return int(e.open.Load()) }

// SetReplicas tells the engine how many replicas share the rate (the live
// ones, itself included), so that each fetches only its share of the jobs
// ahead of their slots. The default is 1.
func (e *Engine) SetReplicas(n int) { e.replicas.Store(int64(max(n, 1))) }
