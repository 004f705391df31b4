package dispatch

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
)

func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	q := newMemQueue("vip", "default")
	m, err := NewMetrics(reg, Sources{
		Queue: q,
		PacerStats: func() pacer.Stats {
			return pacer.Stats{Calls: 7, Granted: 3, Forfeited: map[string]int64{"late": 2},
				ClockOffset: -3 * time.Millisecond, ClockUncertainty: 200 * time.Microsecond}
		},
		EffectiveRate: func(context.Context) (float64, float64, error) { return 250, 400, nil },
		Feedback:      func() pacer.FeedbackStats { return pacer.FeedbackStats{Reports: 4, Cuts: 1} },
	})
	if err != nil {
		t.Fatal(err)
	}
	m.Lanes([]string{"vip", "default"})
	j := &queue.Job{Lane: "vip", EnqueuedAt: time.Now().Add(-time.Second)}
	m.sent(j, time.Now())
	m.outcome("vip", outDelivered)
	m.outcome("default", outExpired)
	m.dead("default", "permanent")
	m.providerLatency(time.Millisecond)
	m.slotWait(time.Millisecond)
	m.lateness(300 * time.Microsecond)
	m.lateness(-time.Microsecond) // a clock step back counts as on time
	m.throttle()
	m.backendError("queue")
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	if got := testutil.ToFloat64(m.jobs.WithLabelValues("vip", outDelivered)); got != 1 {
		t.Errorf("sluice_jobs_total{vip,delivered} = %v, want 1", got)
	}
	n, err := testutil.GatherAndCount(reg, "sluice_pacer_rate", "sluice_queue_depth", "sluice_pacer_slots_granted_total")
	if err != nil {
		t.Fatal(err)
	}
	if n != 2+6+1 {
		t.Errorf("scraped series: %d, want 9 (2 rates, 3 states × 2 lanes, 1 counter)", n)
	}
	want := `
# HELP sluice_pacer_clock_offset_seconds The Redis clock minus this replica's clock, as the pacer estimates it.
# TYPE sluice_pacer_clock_offset_seconds gauge
sluice_pacer_clock_offset_seconds -0.003
# HELP sluice_pacer_clock_uncertainty_seconds The bound on the error of sluice_pacer_clock_offset_seconds: half the round trip it was estimated from.
# TYPE sluice_pacer_clock_uncertainty_seconds gauge
sluice_pacer_clock_uncertainty_seconds 0.0002
# HELP sluice_pacer_calls_total Redis calls this replica made to reserve slots (reserve.lua, rides included): with sluice_pacer_slots_granted_total, the pacer's Redis cost per slot, which grows with the replicas that wait on a full schedule.
# TYPE sluice_pacer_calls_total counter
sluice_pacer_calls_total 7
# HELP sluice_pacer_feedback_reports_total Redis calls this replica made to report the provider's answers (adapt.lua, pacer.adaptive): one per 100ms with answers to report, so the cluster's rate of them grows with the replicas, not with the jobs.
# TYPE sluice_pacer_feedback_reports_total counter
sluice_pacer_feedback_reports_total 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_pacer_clock_offset_seconds",
		"sluice_pacer_clock_uncertainty_seconds", "sluice_pacer_calls_total", "sluice_pacer_feedback_reports_total"); err != nil {
		t.Error(err)
	}
	if got := forfeited(t, reg); !maps.Equal(got, map[string]float64{"unclaimed": 0, "stale": 0, "late": 2, "ineligible": 0, "idle": 0}) {
		t.Errorf("sluice_pacer_slots_forfeited_total = %v, want unclaimed 0, stale 0, late 2, ineligible 0, idle 0", got)
	}
	if got := testutil.CollectAndCount(m.late); got != 1 {
		t.Errorf("sluice_send_lateness_seconds series: %d, want 1", got)
	}
	if got := histogramCount(t, reg, "sluice_send_lateness_seconds"); got != 2 {
		t.Errorf("sluice_send_lateness_seconds count = %d, want 2", got)
	}
}

// The new metrics pass the linter on their own, each from the start.
func TestMetricsCollectAndLint(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry(), Sources{PacerStats: func() pacer.Stats { return pacer.Stats{} }})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]prometheus.Collector{
		"sluice_send_lateness_seconds": m.late,
		"scraped":                      &scraped{src: Sources{PacerStats: func() pacer.Stats { return pacer.Stats{} }}},
	} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("lint %s: %s: %s", name, p.Metric, p.Text)
		}
	}
	// A pacer with no forfeits yet (an empty map) still exports every reason at 0.
	if n := testutil.CollectAndCount(&scraped{src: Sources{PacerStats: func() pacer.Stats { return pacer.Stats{} }}},
		"sluice_pacer_slots_forfeited_total"); n != 5 {
		t.Errorf("sluice_pacer_slots_forfeited_total series with no forfeits: %d, want 5 (unclaimed, stale, late, ineligible, idle)", n)
	}
}

// forfeited returns sluice_pacer_slots_forfeited_total by reason.
func forfeited(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, f := range gather(t, g, "sluice_pacer_slots_forfeited_total") {
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// histogramCount returns the sample count of the histogram name.
func histogramCount(t *testing.T, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	var n uint64
	for _, f := range gather(t, g, name) {
		for _, m := range f.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// gather returns the families called name.
func gather(t *testing.T, g prometheus.Gatherer, name string) []*dto.MetricFamily {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.MetricFamily
	for _, f := range fams {
		if f.GetName() == name {
			out = append(out, f)
		}
	}
	return out
}

// A nil *Metrics records nothing and does not panic.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.outcome("vip", outDelivered)
	m.sent(&queue.Job{}, time.Now())
	m.throttle()
	m.Lanes([]string{"x"})
}

// The pacer's local mode is exported: a 0/1 gauge, the episodes, the
// slots granted locally, the local rate (0 once past max_degraded) and the
// replica count it divides by.
func TestMetricsDegraded(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   pacer.DegradedStats
		want string
	}{
		{"shared", pacer.DegradedStats{DegradedEpisodes: 2, LocalGranted: 40, Sharers: 3}, `
sluice_pacer_degraded 0
sluice_pacer_degraded_total 2
sluice_pacer_local_rate 0
sluice_pacer_local_slots_granted_total 40
sluice_pacer_replicas 3
`},
		{"local", pacer.DegradedStats{Degraded: true, LocalRate: 73.5, DegradedEpisodes: 3, LocalGranted: 41, Sharers: 3}, `
sluice_pacer_degraded 1
sluice_pacer_degraded_total 3
sluice_pacer_local_rate 73.5
sluice_pacer_local_slots_granted_total 41
sluice_pacer_replicas 3
`},
		{"stopped", pacer.DegradedStats{Degraded: true, DegradedStopped: true, LocalRate: 73.5, DegradedEpisodes: 3, Sharers: 3}, `
sluice_pacer_degraded 1
sluice_pacer_degraded_total 3
sluice_pacer_local_rate 0
sluice_pacer_local_slots_granted_total 0
sluice_pacer_replicas 3
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			if _, err := NewMetrics(reg, Sources{PacerStats: func() pacer.Stats { return pacer.Stats{DegradedStats: tc.st} }}); err != nil {
				t.Fatal(err)
			}
			names := []string{"sluice_pacer_degraded", "sluice_pacer_degraded_total", "sluice_pacer_local_rate",
				"sluice_pacer_local_slots_granted_total", "sluice_pacer_replicas"}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			for _, mf := range mfs {
				for _, n := range names {
					if mf.GetName() == n {
						m := mf.GetMetric()[0]
						v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
						fmt.Fprintf(&got, "%s %v\n", n, v)
					}
				}
			}
			if g := got.String(); g != strings.TrimPrefix(tc.want, "\n") {
				t.Errorf("got\n%swant\n%s", g, strings.TrimPrefix(tc.want, "\n"))
			}
			if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
				t.Errorf("lint: %v %v", problems, err)
			}
		})
	}
}
