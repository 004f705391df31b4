package replica

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/internal/testredis"
)

// startIdle runs a replica on a Redis queue with no jobs until the test
// ends (or stop is called), and returns it.
func startIdle(t *testing.T, rs *testredis.Server, id string, env ...string) (r *Replica, stop func()) {
	t.Helper()
	cfg, err := config.Load("", env, map[string]string{
		"queue.name": "idle", "queue.backend": "redis", "redis.url": rs.URL(),
		"pacer.rate": "100", "sink.url": "http://127.0.0.1:1/send", "metrics.listen": config.MetricsOff,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	parts, err := Open(ctx, cfg, Options{ID: id, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parts.Close() })
	r, err = New(parts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("replica %s: run: %v", id, err)
			}
		})
	}
	t.Cleanup(stop)
	return r, stop
}

// A replica that stops cleanly leaves the members at once: the others
// count one replica fewer from their next heartbeat, not for LiveWindow
// (10s) more.
func TestStoppedReplicaLeavesMembers(t *testing.T) {
	rs := testredis.Start(t, testredis.Options{})
	a, _ := startIdle(t, rs, "a")
	_, stopB := startIdle(t, rs, "b")
	m := a.Pacer.Members()
	ids := func() []string {
		live, err := m.Replicas(context.Background(), LiveWindow)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range live {
			out = append(out, r.ID)
		}
		slices.Sort(out)
		return out
	}
	poll.Until(t, 15*time.Second, 20*time.Millisecond, "both replicas announced", func() bool {
		return slices.Equal(ids(), []string{"a", "b"})
	})
	stopB()
	if got := ids(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("members after b stopped: %v, want [a]", got)
	}
}

// An idle replica (no job, so none of the engine's loops calls the pacer)
// whose Redis goes away still counts the failure in
// sluice_backend_errors_total{component="pacer"}, through its heartbeat:
// before, the counter stayed at 0 and the alert on it never fired, though
// /readyz said not ready.
func TestIdleReplicaCountsRedisOutage(t *testing.T) {
	rs := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, rs)
	r, _ := startIdle(t, rs, "idle-1")

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

// admin.allowed_hosts reaches the console: a name listed there is
// answered, any other name is refused (421), and /metrics answers any.
func TestConsoleAnswersAllowedHosts(t *testing.T) {
	rs := testredis.Start(t, testredis.Options{})
	r, _ := startIdle(t, rs, "hosts", "SLUICE_ADMIN_ALLOWED_HOSTS=sluice.example.com")
	h := r.Handler()
	for _, tc := range []struct {
		host, path string
		want       int
	}{
		{"sluice.example.com:9464", "/console/api/state", http.StatusOK},
		{"127.0.0.1:9464", "/console/api/state", http.StatusOK},
		{"attacker.example:9464", "/console/api/state", http.StatusMisdirectedRequest},
		{"attacker.example:9464", "/metrics", http.StatusOK},
	} {
		req := httptest.NewRequestWithContext(t.Context(), "GET", "http://"+tc.host+tc.path, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tc.want {
			t.Errorf("GET %s with Host %s: %d, want %d", tc.path, tc.host, w.Code, tc.want)
		}
	}
}
