package replica

import (
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/pacer"
)

// horizonWatch warns when the replicas sharing the schedule outgrow
// pacer.horizon (pacer.ShortHorizon): the horizon then holds fewer slots
// than there are replicas asking, most of them are refused on every call
// for slots, each slot costs several Redis calls and a loaded host may
// leave the provider under the cap. It warns once each time the count
// crosses over, not on every heartbeat.
type horizonWatch struct{ short bool }

// see takes the live replica count and the rate the schedule runs at.
func (w *horizonWatch) see(log *slog.Logger, rate float64, horizon time.Duration, replicas int) {
	short := pacer.ShortHorizon(rate, horizon, replicas)
	if short && !w.short {
		log.Warn("sluice: pacer.horizon holds fewer slots than there are replicas: most are refused on every call for slots, "+
			"each slot costs several Redis calls, and a loaded host may leave the provider under the cap; "+
			"set pacer.horizon to horizon_for_them or run fewer, larger replicas",
			"replicas", replicas, "rate", rate, "horizon", horizon, "horizon_for_them", pacer.HorizonFor(rate, replicas))
	}
	w.short = short
}
