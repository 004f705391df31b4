package replica

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/console"
	"github.com/sluicehq/sluice/pacer"
)

// operatorWatch remembers the operator's settings a replica last saw in
// the schedule's state, so that it logs each change once, when it sees it
// take effect.
type operatorWatch struct {
	seen          bool
	paused        bool
	rateOverride  float64
	burstOverride int
}

// see logs what changed since the last state seen: a pause or resume, a
// rate or burst override set or cleared. The first state seen is logged
// only when an operator's setting is in force.
func (w *operatorWatch) see(log *slog.Logger, st pacer.State) {
	first := !w.seen
	if first || st.Paused != w.paused {
		switch {
		case st.Paused:
			log.Warn("sluice: operator: schedule paused; this replica sends nothing until resume", "first_seen", first)
		case !first:
			log.Info("sluice: operator: schedule resumed")
		}
	}
	if (first && st.RateOverride > 0) || (!first && st.RateOverride != w.rateOverride) {
		if st.RateOverride > 0 {
			log.Info("sluice: operator: rate override in force", "rate", st.RateOverride, "configured", st.ConfiguredRate, "first_seen", first)
		} else {
			log.Info("sluice: operator: rate override cleared", "rate", st.ConfiguredRate)
		}
	}
	if (first && st.BurstOverride > 0) || (!first && st.BurstOverride != w.burstOverride) {
		if st.BurstOverride > 0 {
			log.Info("sluice: operator: burst override in force", "burst", st.BurstOverride, "first_seen", first)
		} else {
			log.Info("sluice: operator: burst override cleared", "burst", st.ConfiguredBurst)
		}
	}
	*w = operatorWatch{seen: true, paused: st.Paused, rateOverride: st.RateOverride, burstOverride: st.BurstOverride}
}

var pausedDesc = prometheus.NewDesc("sluice_pacer_paused",
	"1 while an operator has paused the cluster's schedule (dispatcher pause), else 0.", nil, nil)

// pausedCollector reads the schedule's paused flag at scrape time.
type pausedCollector struct{ c *pacer.Controls }

func (p pausedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pausedDesc }

func (p pausedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := p.c.State(ctx)
	if err != nil {
		return // Redis is down: sluice_backend_errors_total says so
	}
	v := 0.0
	if st.Paused {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, v)
}

// registerPaused registers sluice_pacer_paused on reg.
func registerPaused(reg prometheus.Registerer, c *pacer.Controls) error {
	if err := reg.Register(pausedCollector{c: c}); err != nil {
		return fmt.Errorf("sluice_pacer_paused: %w", err)
	}
	return nil
}

// newConsole builds the operator's console on the replica's parts.
func (r *Replica) newConsole() (*console.Console, error) {
	tok, err := r.Config.AdminToken()
	if err != nil {
		return nil, fmt.Errorf("replica: console: %w", err)
	}
	c, err := console.New(console.Options{
		Queue: r.Config.Queue.Name, Backend: string(r.Config.Queue.Backend), Q: r.Queue,
		Controls: r.Pacer.Controls(), Members: r.Pacer.Members(), History: r.History, Token: tok, Log: r.Log,
		AllowedHosts: r.Config.Admin.AllowedHosts,
	})
	if err != nil {
		return nil, fmt.Errorf("replica: console: %w", err)
	}
	return c, nil
}
