package dispatch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// A job whose request stays open longer than the visibility timeout is
// extended while it is open, and leaves the set of open requests once it
// is settled.
func TestKeepAliveExtendsOpenRequests(t *testing.T) {
	release := make(chan struct{})
	s := heldUntil(release)
	// 300ms: extended every 100ms, checked every 25ms.
	h := start(t, Config{VisibilityTimeout: 300 * time.Millisecond}, twoLanes, &gatePacer{}, s)
	h.q.Enqueue(context.Background(), job("slow", "default", "x"))
	eventually(t, 5*time.Second, "the request open", func() bool { return h.e.open.Load() == 1 })
	// Three extensions take at least 200ms (one at the first round, then
	// one per 100ms): the request outlived most of the visibility timeout.
	eventually(t, 10*time.Second, "the open request extended 3 times", func() bool { return h.q.extended("slow") >= 3 })
	close(release)
	eventually(t, 5*time.Second, "the job acked", func() bool { return h.q.settledCount() == 1 })
	eventually(t, 5*time.Second, "the set of open requests empty", func() bool { return h.e.sending.len() == 0 })
	if got := h.q.outcomes()["slow"].how; got != "ack" {
		t.Errorf("slow job settled by %q, want ack", got)
	}
}

// While the engine shuts down, requests still open are kept alive until
// they are settled.
func TestKeepAliveDuringShutdown(t *testing.T) {
	release := make(chan struct{})
	s := heldUntil(release)
	h := start(t, Config{VisibilityTimeout: 300 * time.Millisecond, ShutdownTimeout: 20 * time.Second}, twoLanes, &gatePacer{}, s)
	h.q.Enqueue(context.Background(), job("slow", "default", "x"))
	eventually(t, 5*time.Second, "the request open", func() bool { return h.e.open.Load() == 1 })
	h.cancel()
	h.cancel = nil
	before := h.q.extended("slow")
	eventually(t, 10*time.Second, "the open request extended twice after shutdown began",
		func() bool { return h.q.extended("slow") >= before+2 })
	close(release)
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20s of the request's answer")
	}
	if got := h.q.outcomes()["slow"].how; got != "ack" {
		t.Errorf("slow job settled by %q, want ack", got)
	}
}

// A job of cost 3, picked on its first slot, is kept alive while it waits
// for its two further slots: it is then in neither the lane buffer nor a
// request, and without extensions its visibility timeout would lapse and
// another replica send it too.
func TestKeepAliveWhileCostWaitsForSlots(t *testing.T) {
	p := &gatePacer{gate: make(chan struct{})}
	rec := &recorder{}
	// 300ms: extended every 100ms, checked every 25ms.
	h := start(t, Config{VisibilityTimeout: 300 * time.Millisecond}, twoLanes, p, rec)
	j := job("c3", "default", "x")
	j.Cost = 3
	h.q.Enqueue(context.Background(), j)
	eventually(t, 5*time.Second, "the job held", func() bool { return h.e.Held() == 1 })
	p.gate <- struct{}{} // its first slot: picked, then it waits for 2 more
	eventually(t, 5*time.Second, "the job picked", func() bool { return h.e.Held() == 0 })
	before := h.q.extended("c3")
	// The pacer grants nothing more until the test says so: the job waits.
	// A keep-alive round under way at the pick may still extend it as a
	// held job, once; the second extension is of the job waiting.
	eventually(t, 10*time.Second, "the waiting job extended twice",
		func() bool { return h.q.extended("c3") >= before+2 })
	if got := rec.order(); len(got) != 0 {
		t.Fatalf("sent %v before the job had its slots", got)
	}
	p.gate <- struct{}{}
	p.gate <- struct{}{}
	eventually(t, 5*time.Second, "the job acked", func() bool { return h.q.settledCount() == 1 })
	eventually(t, 5*time.Second, "the set of open requests empty", func() bool { return h.e.sending.len() == 0 })
	if got := h.q.outcomes()["c3"].how; got != "ack" {
		t.Errorf("job settled by %q, want ack", got)
	}
	if got := rec.order(); len(got) != 1 {
		t.Errorf("sent %v, want c3 once", got)
	}
}

// A job that expires while it waits for its further slots is dead-lettered
// as expired when they come, not sent stale.
func TestCostWaitExpiredJobDeadLettered(t *testing.T) {
	var skew atomic.Int64 // how far the engine's clock is ahead
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	p := &gatePacer{gate: make(chan struct{})}
	rec := &recorder{}
	h := start(t, Config{Now: now}, twoLanes, p, rec)
	j := job("otp", "default", "x")
	j.Cost = 2
	j.ExpiresAt = time.Now().Add(time.Hour)
	h.q.Enqueue(context.Background(), j)
	eventually(t, 5*time.Second, "the job held", func() bool { return h.e.Held() == 1 })
	p.gate <- struct{}{} // its first slot: picked, then it waits for 1 more
	eventually(t, 5*time.Second, "the job picked", func() bool { return h.e.Held() == 0 })
	skew.Store(int64(2 * time.Hour)) // it expires while it waits
	p.gate <- struct{}{}
	eventually(t, 5*time.Second, "the job settled", func() bool { return h.q.settledCount() == 1 })
	if d := h.q.outcomes()["otp"]; d.how != "dead" || !strings.Contains(d.reason, "expired") {
		t.Errorf("job that expired waiting for its slots settled %+v, want dead-lettered as expired", d)
	}
	if got := rec.order(); len(got) != 0 {
		t.Errorf("sent %v, want nothing", got)
	}
}

// furtherSlotsPacer is a gatePacer whose TakeAhead fails, while failing is
// set, for the further slots of a job that costs more than one.
type furtherSlotsPacer struct {
	*gatePacer
	failing atomic.Bool
	failed  atomic.Int64
}

var errRedisDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (p *furtherSlotsPacer) TakeAhead(ctx context.Context, n int, ahead time.Duration) (pacer.Slot, error) {
	if n > 1 && p.failing.Load() {
		p.failed.Add(1)
		return pacer.Slot{}, errRedisDown
	}
	return p.gatePacer.TakeAhead(ctx, n, ahead)
}

// When the further slots of a job cannot be had, the failure is a backend
// error (counted, reported, backed off from) and the job goes back to the
// front of its lane, to be sent once the pacer answers again.
func TestCostWaitFailureReported(t *testing.T) {
	p := &furtherSlotsPacer{gatePacer: &gatePacer{}}
	p.failing.Store(true)
	q := newMemQueue("vip", "default")
	rec := &recorder{}
	m, err := NewMetrics(prometheus.NewRegistry(), Sources{})
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, Config{}, Deps{Queue: q, Pacer: p, Priority: twoLanes, Sink: rec, Metrics: m})
	j := job("c3", "default", "x")
	j.Cost = 3
	q.Enqueue(context.Background(), j)
	eventually(t, 5*time.Second, "the further slots refused twice", func() bool { return p.failed.Load() >= 2 })
	if got := testutil.ToFloat64(m.backendErrors.WithLabelValues("pacer")); got < 1 {
		t.Errorf(`sluice_backend_errors_total{component="pacer"} = %v after the further slots failed, want at least 1`, got)
	}
	if got := rec.order(); len(got) != 0 {
		t.Fatalf("sent %v without its slots", got)
	}
	p.failing.Store(false)
	eventually(t, 5*time.Second, "the job acked", func() bool { return q.settledCount() == 1 })
	if got := rec.order(); len(got) != 1 {
		t.Errorf("sent %v, want c3 once", got)
	}
	if got := q.fetchedCount(); got != 1 {
		t.Errorf("fetched %d times, want once (put back, not lost)", got)
	}
}

// flakyExtend is a memDelivery whose first Extend fails; it records
// every Extend.
type flakyExtend struct {
	*memDelivery
	q *flakyExtendQueue
}

func (d flakyExtend) Extend(ctx context.Context) error {
	if d.q.calls.Add(1) == 1 {
		return errors.New("connection reset by peer")
	}
	return d.memDelivery.Extend(ctx)
}

// flakyExtendQueue is a memQueue whose deliveries are flakyExtend.
type flakyExtendQueue struct {
	*memQueue
	calls atomic.Int64 // Extend calls
}

func (q *flakyExtendQueue) Fetch(ctx context.Context, lane string, n int) ([]queue.Delivery, error) {
	ds, err := q.memQueue.Fetch(ctx, lane, n)
	for i, d := range ds {
		ds[i] = flakyExtend{memDelivery: d.(*memDelivery), q: q}
	}
	return ds, err
}

// An Extend that fails is tried again at the next keep-alive round, not a
// third of the visibility timeout later. The engine's clock stands still
// here, so no job ever comes due again by age: only the retry of the
// failed Extend can extend the job a second time.
func TestKeepAliveRetriesFailedExtend(t *testing.T) {
	stopped := time.Now()
	q := &flakyExtendQueue{memQueue: newMemQueue("vip", "default")}
	release := make(chan struct{})
	s := heldUntil(release)
	// Rounds every 25ms of real time.
	cfg := Config{VisibilityTimeout: 300 * time.Millisecond, Now: func() time.Time { return stopped }}
	e, _ := runEngine(t, cfg, Deps{Queue: q, Pacer: &gatePacer{}, Priority: twoLanes, Sink: s})
	answer := sync.OnceFunc(func() { close(release) })
	t.Cleanup(answer) // before the engine stops, should the test fail early
	q.Enqueue(context.Background(), job("slow", "default", "x"))
	eventually(t, 5*time.Second, "the request open", func() bool { return e.open.Load() == 1 })
	eventually(t, 10*time.Second, "the failed Extend tried again", func() bool { return q.calls.Load() >= 2 })
	if got := q.extended("slow"); got != 1 {
		t.Errorf("job extended %d times, want once (after the failed try)", got)
	}
	answer()
	eventually(t, 5*time.Second, "the job acked", func() bool { return q.settledCount() == 1 })
}

// heldUntil is a sink whose requests stay open until release is closed
// (they succeed) or their context ends.
func heldUntil(release <-chan struct{}) sink.SenderFunc {
	return func(ctx context.Context, j *queue.Job) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
