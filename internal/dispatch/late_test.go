package dispatch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// seenRequest is what the provider saw of one request.
type seenRequest struct{ id, attempt string }

// providerLog is a real HTTP provider on loopback that records each
// request and answers 200.
type providerLog struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

func newProviderLog(t *testing.T) *providerLog {
	t.Helper()
	p := &providerLog{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, seenRequest{r.Header.Get(sink.HeaderJobID), r.Header.Get(sink.HeaderAttempt)})
		p.mu.Unlock()
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *providerLog) requests() []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seenRequest(nil), p.seen...)
}

// runOverHTTP runs an engine on p, a memory queue and the HTTP sink
// toward a recording provider, with metrics on a registry of its own,
// until the test ends.
func runOverHTTP(t *testing.T, p *gatePacer) (*providerLog, *memQueue, *prometheus.Registry) {
	t.Helper()
	prov := newProviderLog(t)
	_, q, reg := runHTTPSink(t, p, prov.URL)
	return prov, q, reg
}

// runHTTPSink runs an engine on p, a memory queue and the HTTP sink toward
// url, with metrics on a registry of its own, until the test ends.
func runHTTPSink(t *testing.T, p *gatePacer, url string) (*Engine, *memQueue, *prometheus.Registry) {
	t.Helper()
	s, err := sink.NewHTTP(sink.HTTPConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg, Sources{})
	if err != nil {
		t.Fatal(err)
	}
	q := newMemQueue("vip", "default")
	e, err := New(Config{}, Deps{Queue: q, Pacer: p, Sink: s, Priority: twoLanes, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return e, q, reg
}

// A slot already past its deadline when the request would leave sends
// nothing: the slot is forfeited and the job goes on the next slot, same
// delivery, same attempt, acked once.
func TestLateSlotIsForfeitedAndJobSentOnALaterSlot(t *testing.T) {
	p := &gatePacer{late: 1}
	prov, q, reg := runOverHTTP(t, p)
	q.Enqueue(context.Background(), job("otp", "vip", "x"))
	eventually(t, 10*time.Second, "the job settled", func() bool { return q.settledCount() == 1 })

	if got := prov.requests(); len(got) != 1 || got[0] != (seenRequest{"otp", "1"}) {
		t.Errorf("provider saw %v, want one request for otp, attempt 1 (nothing on the late slot)", got)
	}
	if f := p.forfeited(); len(f) != 1 || !f[0].Late(time.Now()) {
		t.Errorf("forfeited %v, want the one late slot", f)
	}
	if slots, _ := p.count(); slots != 2 {
		t.Errorf("took %d slots, want 2 (the late one and the one the job went on)", slots)
	}
	if d := q.outcomes()["otp"]; d == nil || d.how != "ack" || d.job.Attempt != 1 {
		t.Errorf("otp settled %+v, want acked on attempt 1", d)
	}
	if fetched := q.fetchedCount(); fetched != 1 {
		t.Errorf("fetched %d times, want 1: the job stays with this replica, not retried through the queue", fetched)
	}
	if n := histogramCount(t, reg, "sluice_send_lateness_seconds"); n != 1 {
		t.Errorf("sluice_send_lateness_seconds has %d samples, want 1 (the request that left)", n)
	}
}

// Every request that leaves records its lateness once.
func TestLatenessRecordedPerSend(t *testing.T) {
	p := &gatePacer{}
	prov, q, reg := runOverHTTP(t, p)
	var jobs []*queue.Job
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		jobs = append(jobs, job(id, "default", "x"))
	}
	q.Enqueue(context.Background(), jobs...)
	eventually(t, 10*time.Second, "5 jobs settled", func() bool { return q.settledCount() == 5 })
	if n := len(prov.requests()); n != 5 {
		t.Errorf("provider saw %d requests, want 5", n)
	}
	if n := histogramCount(t, reg, "sluice_send_lateness_seconds"); n != 5 {
		t.Errorf("sluice_send_lateness_seconds has %d samples, want 5", n)
	}
	if f := p.forfeited(); len(f) != 0 {
		t.Errorf("forfeited %d slots with an hour to go, want none", len(f))
	}
}

// A sink that holds at the wire (the HTTP sink) gets its request holdAhead
// before the slot and waits out the rest in Hold; any other sink gets it
// only once its slot has come, and no hold.
func TestHoldingSinkGetsTheSlotAhead(t *testing.T) {
	p := &gatePacer{}
	prov, q, _ := runOverHTTP(t, p)
	q.Enqueue(context.Background(), job("otp", "vip", "x"))
	eventually(t, 10*time.Second, "the job settled", func() bool { return q.settledCount() == 1 })
	if got := prov.requests(); len(got) != 1 {
		t.Fatalf("provider saw %v, want one request", got)
	}
	p.mu.Lock()
	aheads, holds := append([]time.Duration(nil), p.aheads...), p.holds
	p.mu.Unlock()
	if len(aheads) == 0 || aheads[0] != holdAhead || holds != 1 {
		t.Errorf("HTTP sink: slots taken %v ahead, %d holds; want %s ahead and 1 hold", aheads, holds, holdAhead)
	}

	plain := &gatePacer{}
	var sent atomic.Int64
	s := sink.SenderFunc(func(ctx context.Context, j *queue.Job) error {
		if err := sink.Hold(ctx); err != nil {
			return err
		}
		sent.Add(1)
		return nil
	})
	q2 := newMemQueue("vip", "default")
	e, err := New(Config{}, Deps{Queue: q2, Pacer: plain, Sink: s, Priority: twoLanes})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	q2.Enqueue(context.Background(), job("otp2", "vip", "x"))
	eventually(t, 10*time.Second, "the job settled", func() bool { return q2.settledCount() == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	plain.mu.Lock()
	defer plain.mu.Unlock()
	if len(plain.aheads) == 0 || plain.aheads[0] != 0 || plain.holds != 0 || sent.Load() != 1 {
		t.Errorf("a sink that does not hold: slots taken %v ahead, %d holds, %d sent; want 0 ahead, no hold, 1 sent",
			plain.aheads, plain.holds, sent.Load())
	}
}
