package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A component's error stops counting against readiness once a probe of it
// passes and the error is older than recoverAfter: an idle replica is
// ready again when its backend is, not on its next job. A component that
// keeps failing stays not ready.
func TestReadyRecovers(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e, err := New(Config{Now: clock}, Deps{Queue: newMemQueue("vip", "default"), Pacer: &gatePacer{}, Sink: &recorder{}, Priority: twoLanes})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var probeErr error
	probe := Probe{Component: "pacer", Check: func(context.Context) error { return probeErr }}

	e.backendError("pacer", errors.New("server shutdown"))
	if err := e.Ready(ctx, probe); err == nil || !strings.Contains(err.Error(), "server shutdown") {
		t.Fatalf("Ready right after the error: %v; want the error", err)
	}
	advance(recoverAfter / 2)
	if err := e.Ready(ctx, probe); err == nil {
		t.Fatal("Ready within recoverAfter of the error: nil; want the error")
	}
	probeErr = errors.New("connection refused")
	advance(recoverAfter)
	if err := e.Ready(ctx, probe); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Ready with the probe failing: %v; want the probe's error", err)
	}
	probeErr = nil
	if err := e.Ready(ctx, probe); err != nil {
		t.Fatalf("Ready with the probe passing and the error %s old: %v; want nil", recoverAfter*3/2, err)
	}
	// Without a probe of its own, a component keeps its error.
	e.backendError("sink", errors.New("x"))
	advance(time.Hour)
	if err := e.Ready(ctx, probe); err == nil {
		t.Error("Ready with an unprobed component's error: nil; want the error")
	}
}

// Sent counts the requests sent per lane, every lane from zero.
func TestSentPerLane(t *testing.T) {
	rec := &recorder{}
	h := start(t, Config{}, twoLanes, &gatePacer{}, rec)
	if got := h.e.Sent(); len(got) != 2 || got["vip"] != 0 || got["default"] != 0 {
		t.Errorf("Sent before any job: %v; want vip 0, default 0", got)
	}
	ctx := context.Background()
	for i := range 5 {
		h.q.Enqueue(ctx, job(fmt.Sprintf("d%d", i), "default", "x"))
	}
	h.q.Enqueue(ctx, job("v", "vip", "x"))
	eventually(t, 10*time.Second, "6 jobs settled", func() bool { return h.q.settledCount() == 6 })
	if got := h.e.Sent(); got["vip"] != 1 || got["default"] != 5 {
		t.Errorf("Sent: %v; want vip 1, default 5", got)
	}
}

// The dead-letter counters exist at zero for every lane and reason from the
// start, so that increase() sees the first dead letter.
func TestDeadLettersFromZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, Sources{})
	if err != nil {
		t.Fatal(err)
	}
	m.Lanes([]string{"vip", "default"})
	if n := testutil.CollectAndCount(m.deadLetters); n != 2*len(deadReasons) {
		t.Errorf("sluice_dead_letters_total has %d series before any dead letter, want %d", n, 2*len(deadReasons))
	}
	if v := testutil.ToFloat64(m.deadLetters.WithLabelValues("vip", "expired")); v != 0 {
		t.Errorf("vip/expired = %g, want 0", v)
	}
}
