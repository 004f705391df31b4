package replica

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/internal/testredis"
)

// An idle replica (no job, so none of the engine's loops calls the pacer)
// whose Redis goes away still counts the failure in
// sluice_backend_errors_total{component="pacer"}, through its heartbeat:
// before, the counter stayed at 0 and the alert on it never fired, though
// /readyz said not ready.
func TestIdleReplicaCountsRedisOutage(t *testing.T) {
	rs := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, rs)
	cfg, err := config.Load("", nil, map[string]string{
		"queue.name": "idle", "queue.backend": "redis", "redis.url": rs.URL(),
		"pacer.rate": "100", "sink.url": "http://127.0.0.1:1/send", "metrics.listen": config.MetricsOff,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	parts, err := Open(ctx, cfg, Options{ID: "idle-1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parts.Close() })
	r, err := New(parts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	pacerErrors := func() float64 {
		fams, err := r.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != "sluice_backend_errors_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				if label(m, "component") == "pacer" {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	if n := pacerErrors(); n != 0 {
		t.Fatalf("pacer errors before the outage: %g, want 0", n)
	}
	rs.Kill()
	poll.Until(t, 15*time.Second, 50*time.Millisecond, "the pacer's errors counted while idle", func() bool {
		return pacerErrors() > 0
	})
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
