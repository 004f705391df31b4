package dispatch

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// A settle the queue refuses because the delivery is no longer this
// replica's (queue.ErrSettled: its visibility timeout passed) is not a
// backend failure: it leaves readiness and sluice_backend_errors_total
// alone. Any other failed settle still counts.
func TestSettleNoLongerOursIsNoBackendError(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg, Sources{})
	if err != nil {
		t.Fatal(err)
	}
	s := sink.SenderFunc(func(context.Context, *queue.Job) error { return nil })
	e, err := New(Config{}, Deps{Queue: newMemQueue("vip", "default"), Pacer: &gatePacer{}, Sink: s, Priority: twoLanes, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	j := job("a", "default", "x")
	e.settled(j, "ack", fmt.Errorf("natsq: ack a: %w", queue.ErrSettled))
	if err := e.Ready(t.Context()); err != nil {
		t.Errorf("Ready after a stale ack: %v, want nil", err)
	}
	if n := backendErrors(t, reg); n != 0 {
		t.Errorf("backend errors after a stale ack: %g, want 0", n)
	}
	e.settled(j, "ack", errors.New("redis: connection refused"))
	if err := e.Ready(t.Context()); err == nil {
		t.Error("Ready after a failed ack: nil, want the queue's error")
	}
	if n := backendErrors(t, reg); n != 1 {
		t.Errorf("backend errors after a failed ack: %g, want 1", n)
	}
}

// backendErrors sums sluice_backend_errors_total.
func backendErrors(t *testing.T, g prometheus.Gatherer) float64 {
	t.Helper()
	var n float64
	for _, f := range gather(t, g, "sluice_backend_errors_total") {
		for _, m := range f.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}
