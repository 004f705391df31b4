package dispatch

import (
	"context"
	"net"
	"testing"
	"time"
)

// A request whose connection never opens (the provider's port is closed)
// is an attempt, settled as a transient failure, but not a request sent:
// neither the per-lane sent counts (the console's achieved rate) nor the
// provider's latency or the wait before sending count it. Before, a down
// provider showed as the cluster sending at its cap.
func TestRequestThatNeverLeftIsNotCountedAsSent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/send"
	_ = l.Close()

	e, q, reg := runHTTPSink(t, &gatePacer{}, closed)
	q.Enqueue(context.Background(), job("a", "default", "x"), job("b", "vip", "x"))
	eventually(t, 10*time.Second, "both jobs settled", func() bool { return q.settledCount() >= 2 })
	for id, d := range q.outcomes() {
		if d.how != "retry" {
			t.Errorf("job %s settled %q (%s), want retry: a refused connection is transient", id, d.how, d.reason)
		}
	}
	for lane, n := range e.Sent() {
		if n != 0 {
			t.Errorf("Sent()[%s] = %d, want 0: nothing reached the provider", lane, n)
		}
	}
	for _, name := range []string{"sluice_provider_latency_seconds", "sluice_wait_seconds"} {
		if n := histogramCount(t, reg, name); n != 0 {
			t.Errorf("%s has %d samples, want 0: nothing reached the provider", name, n)
		}
	}
}

// The provider's latency runs from when the request left, not from the
// wait for its slot before it: a sink that holds (the HTTP sink) is handed
// the request holdAhead before its slot and waits in Hold until it comes.
func TestProviderLatencyLeavesOutTheWaitForTheSlot(t *testing.T) {
	const wait = 200 * time.Millisecond
	p := &gatePacer{holdFor: wait}
	prov, q, reg := runOverHTTP(t, p)
	q.Enqueue(context.Background(), job("a", "default", "x"), job("b", "default", "x"))
	eventually(t, 10*time.Second, "both jobs settled", func() bool { return q.settledCount() == 2 })
	if n := len(prov.requests()); n != 2 {
		t.Fatalf("provider saw %d requests, want 2", n)
	}
	var sum float64
	for _, f := range gather(t, reg, "sluice_provider_latency_seconds") {
		for _, m := range f.GetMetric() {
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	// Each request waited 200ms in Hold; a provider on loopback answers
	// far sooner than that.
	if sum >= (2 * wait).Seconds() {
		t.Errorf("sluice_provider_latency_seconds sums %.3fs over 2 requests, want under %s: the wait for the slot is not the provider's", sum, 2*wait)
	}
}
