package replica

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/dispatch"
	"github.com/sluicehq/sluice/pacer"
)

// permits returns the cluster-wide permits of sink.max_in_flight_total, or
// nil when it is 0 (no bound). A permit's lease is twice the sink's
// timeout and at least 10s: long enough that a live replica's heartbeat
// (every third of it) renews it, and that a dead replica's requests are
// over at the provider before its permits come back.
func (p *Parts) permits() (dispatch.Permits, error) {
	total := p.Config.Sink.MaxInFlightTotal
	if total == 0 {
		return nil, nil
	}
	lease := max(10*time.Second, 2*p.Config.Sink.Timeout)
	pm, err := pacer.NewPermits(p.Redis, p.Config.PacerConfig().Name, p.ID, total, lease, p.Log)
	if err != nil {
		return nil, fmt.Errorf("replica: permits: %w", err)
	}
	return pm, nil
}
