package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/queue"
)

func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	q := newMemQueue("vip", "default")
	m, err := NewMetrics(reg, Sources{
		Queue:         q,
		SlotsGranted:  func() float64 { return 3 },
		EffectiveRate: func(context.Context) (float64, float64, error) { return 250, 400, nil },
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
}

// A nil *Metrics records nothing and does not panic.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.outcome("vip", outDelivered)
	m.sent(&queue.Job{}, time.Now())
	m.throttle()
	m.Lanes([]string{"x"})
}
