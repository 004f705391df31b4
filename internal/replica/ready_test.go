package replica

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/pacer"
)

func TestReady(t *testing.T) {
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("dispatch: queue: connection refused") }
	stateOK := func(context.Context) (pacer.State, error) { return pacer.State{}, nil }
	var stateCalls int
	stateDown := func(context.Context) (pacer.State, error) {
		stateCalls++
		return pacer.State{}, pacer.ErrUnavailable
	}
	since := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	local := pacer.DegradedStats{Degraded: true, LocalRate: 73.5, Sharers: 3, DegradedSince: since}
	stopped := local
	stopped.DegradedStopped = true
	for _, tc := range []struct {
		name   string
		engine func(context.Context) error
		deg    pacer.DegradedStats
		state  func(context.Context) (pacer.State, error)
		code   int
		body   string
	}{
		{"all answer", ok, pacer.DegradedStats{}, stateOK, http.StatusOK, "ready"},
		{"queue down", down, pacer.DegradedStats{}, stateOK, http.StatusServiceUnavailable, "not ready: dispatch: queue"},
		{"redis down, stop", ok, pacer.DegradedStats{}, stateDown, http.StatusServiceUnavailable, "not ready: pacer: redis unavailable"},
		{"redis down, local", ok, local, stateDown, http.StatusOK,
			"ready, degraded: the pacer's Redis is unreachable; this replica paces itself at 73.5/s (1 of 3 replicas) since 2026-11-21T10:00:00Z"},
		{"redis down, past max_degraded", ok, stopped, stateDown, http.StatusServiceUnavailable, "not ready: pacer: Redis unreachable for longer than pacer.max_degraded"},
		{"queue down, local", down, local, stateDown, http.StatusServiceUnavailable, "not ready: dispatch: queue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stateCalls = 0
			code, body := ready(context.Background(), tc.engine, tc.deg, tc.state)
			if code != tc.code || !strings.HasPrefix(body, tc.body) {
				t.Errorf("got %d %q, want %d %q…", code, body, tc.code, tc.body)
			}
			if tc.deg.Degraded && stateCalls > 0 {
				t.Errorf("degraded: asked Redis for the state %d times, want none (it would wait for a timeout)", stateCalls)
			}
		})
	}
}
