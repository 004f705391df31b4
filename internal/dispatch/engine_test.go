package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var twoLanes = priority.Config{Lanes: []priority.Lane{{Name: "vip", Weight: 8}, {Name: "default", Weight: 2}}}

// harness runs an engine on fakes until the test ends.
type harness struct {
	q      *memQueue
	p      *gatePacer
	e      *Engine
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, cfg Config, prio priority.Config, p *gatePacer, s sink.Sender) *harness {
	t.Helper()
	return startWith(t, cfg, prio, p, s, nil)
}

// startWith is start with a feedback (nil for none).
func startWith(t *testing.T, cfg Config, prio priority.Config, p *gatePacer, s sink.Sender, fb Feedback) *harness {
	t.Helper()
	var lanes []string
	for _, l := range prio.Lanes {
		lanes = append(lanes, l.Name)
	}
	q := newMemQueue(lanes...)
	deps := Deps{Queue: q, Pacer: p, Sink: s, Priority: prio}
	if fb != nil {
		deps.Feedback = fb
	}
	e, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{q: q, p: p, e: e, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- e.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

// runEngine runs an engine for cfg on deps until the test ends or the
// returned stop is called, whichever comes first; stop returns when Run
// has.
func runEngine(t *testing.T, cfg Config, deps Deps) (*Engine, func()) {
	t.Helper()
	e, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Error("Run did not return within 20s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return e, stop
}

func (h *harness) stop(t *testing.T) {
	t.Helper()
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20s of cancel")
	}
}

func job(id, lane, payload string) *queue.Job {
	return &queue.Job{ID: id, Lane: lane, Payload: json.RawMessage(`"` + payload + `"`)}
}

// eventually polls cond every 2ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, 2*time.Millisecond, what, cond)
}

// recorder is a sink that records the order of jobs sent.
type recorder struct {
	mu   sync.Mutex
	sent []string
	fn   func(j *queue.Job) error
}

func (r *recorder) Send(_ context.Context, j *queue.Job) error {
	r.mu.Lock()
	r.sent = append(r.sent, j.ID)
	r.mu.Unlock()
	if r.fn != nil {
		return r.fn(j)
	}
	return nil
}

func (r *recorder) order() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.sent...)
}

// The job is chosen when its slot comes: a privileged job that arrives
// while the default lane holds a backlog takes the very next slot.
func TestPicksAtSlotTime(t *testing.T) {
	p := &gatePacer{gate: make(chan struct{})}
	rec := &recorder{}
	h := start(t, Config{}, twoLanes, p, rec)
	ctx := context.Background()
	for i := range 30 {
		h.q.Enqueue(ctx, job(fmt.Sprintf("d%02d", i), "default", "x"))
	}
	for range 3 {
		p.gate <- struct{}{}
	}
	eventually(t, 5*time.Second, "3 jobs sent", func() bool { return len(rec.order()) == 3 })
	h.q.Enqueue(ctx, job("vip1", "vip", "x"))
	eventually(t, 5*time.Second, "vip job stocked", func() bool { return h.e.buf.len(0) == 1 })
	p.gate <- struct{}{}
	eventually(t, 5*time.Second, "4 jobs sent", func() bool { return len(rec.order()) == 4 })
	if got := rec.order(); got[3] != "vip1" {
		t.Errorf("sent %v; want vip1 fourth, on the first slot after it arrived", got)
	}
}

// At most MaxInFlight requests are open at once.
func TestInFlightBound(t *testing.T) {
	var open, peak atomic.Int32
	release := make(chan struct{})
	s := sink.SenderFunc(func(ctx context.Context, j *queue.Job) error {
		n := open.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		open.Add(-1)
		return nil
	})
	h := start(t, Config{MaxInFlight: 3}, twoLanes, &gatePacer{}, s)
	for i := range 10 {
		h.q.Enqueue(context.Background(), job(fmt.Sprintf("j%d", i), "default", "x"))
	}
	eventually(t, 5*time.Second, "3 requests open", func() bool { return open.Load() == 3 })
	close(release)
	eventually(t, 5*time.Second, "all acked", func() bool { return h.q.settledCount() == 10 })
	if p := peak.Load(); p != 3 {
		t.Errorf("peak requests open = %d, want 3", p)
	}
}

// Each provider answer settles the job its own way.
func TestOutcomes(t *testing.T) {
	var throttledOnce atomic.Bool
	rec := &recorder{fn: func(j *queue.Job) error {
		switch string(j.Payload) {
		case `"perm"`:
			return fmt.Errorf("%w: 400 bad number", sink.ErrPermanent)
		case `"trans"`:
			return fmt.Errorf("%w: 502", sink.ErrTransient)
		case `"thr"`:
			if throttledOnce.CompareAndSwap(false, true) {
				return &sink.ThrottledError{Status: 429, RetryAfter: 2 * time.Second}
			}
		}
		return nil
	}}
	p := &gatePacer{}
	cfg := Config{BackoffMin: time.Second, BackoffMax: time.Minute, Rand: func() float64 { return 1 }}
	h := start(t, cfg, twoLanes, p, rec)
	ctx := context.Background()
	h.q.Enqueue(ctx, job("ok", "default", "ok"), job("perm", "default", "perm"),
		job("trans", "default", "trans"), job("thr", "default", "thr"))
	exp := job("exp", "vip", "x")
	exp.ExpiresAt = time.Now().Add(-time.Second)
	h.q.Enqueue(ctx, exp)
	eventually(t, 5*time.Second, "5 jobs settled", func() bool { return h.q.settledCount() == 5 })

	out := h.q.outcomes()
	check := func(id, how, reason string) {
		t.Helper()
		d := out[id]
		if d == nil || d.how != how || !strings.Contains(d.reason, reason) {
			t.Errorf("job %s: settled %+v, want %s with reason containing %q", id, d, how, reason)
		}
	}
	check("ok", "ack", "")
	check("perm", "dead", "400 bad number")
	check("trans", "retry", "502")
	check("thr", "ack", "")
	check("exp", "dead", "expired")
	if d := out["trans"]; d != nil && d.delay != time.Second {
		t.Errorf("first retry after %s, want 1s (BackoffMin with jitter 1)", d.delay)
	}
	for _, id := range rec.order() {
		if id == "exp" {
			t.Error("expired job was sent")
		}
	}
	if slots, thr := p.count(); len(thr) != 1 || thr[0] != 2*time.Second || slots != 5 {
		t.Errorf("pacer: %d slots, throttles %v; want 5 slots (4 jobs + 1 resend), one throttle of 2s", slots, thr)
	}
}

// answers records what the engine reports to a feedback.
type answers struct {
	mu  sync.Mutex
	got []pacer.Answer
}

func (a *answers) Observe(x pacer.Answer) { a.mu.Lock(); a.got = append(a.got, x); a.mu.Unlock() }

func (a *answers) snapshot() []pacer.Answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got)
}

// With a feedback, every answer of the provider is reported (a failure
// that is no answer is not), and a throttling answer holds nothing by
// itself: the job goes back and is sent again, with no attempt spent.
func TestFeedbackHearsEveryAnswer(t *testing.T) {
	var throttledOnce atomic.Bool
	rec := &recorder{fn: func(j *queue.Job) error {
		switch string(j.Payload) {
		case `"perm"`:
			return &sink.StatusError{Status: 400}
		case `"net"`:
			return fmt.Errorf("%w: connection refused", sink.ErrTransient)
		case `"thr"`:
			if throttledOnce.CompareAndSwap(false, true) {
				return &sink.ThrottledError{Status: 503, RetryAfter: 2 * time.Second}
			}
		}
		return nil
	}}
	p := &gatePacer{}
	fb := &answers{}
	h := startWith(t, Config{BackoffMin: time.Minute, BackoffMax: time.Minute}, twoLanes, p, rec, fb)
	h.q.Enqueue(context.Background(), job("ok", "default", "ok"), job("perm", "default", "perm"),
		job("net", "default", "net"), job("thr", "default", "thr"))
	eventually(t, 5*time.Second, "4 jobs settled", func() bool { return h.q.settledCount() == 4 })
	var ok, thr int
	for _, a := range fb.snapshot() {
		if a.Throttled {
			thr++
			if a.RetryAfter != 2*time.Second {
				t.Errorf("throttled answer reported with Retry-After %s, want 2s", a.RetryAfter)
			}
		} else {
			ok++
		}
	}
	if ok != 3 || thr != 1 {
		t.Errorf("reported %d clean and %d throttling answers, want 3 (ok, perm, thr resent) and 1", ok, thr)
	}
	if _, throttles := p.count(); len(throttles) != 0 {
		t.Errorf("Pacer.Throttle called %v with a feedback, want never", throttles)
	}
	if d := h.q.outcomes()["thr"]; d == nil || d.how != "ack" {
		t.Errorf("throttled job settled %+v, want acked after its resend", d)
	}
}

// A replica whose pacer stands aside takes no more slots and hands the
// jobs it holds back to the queue, and says why in its readiness.
func TestStandAsideReleasesHeldJobs(t *testing.T) {
	p := &gatePacer{gate: make(chan struct{}, 1)}
	rec := &recorder{}
	h := start(t, Config{}, twoLanes, p, rec)
	for i := range 5 {
		h.q.Enqueue(context.Background(), job(fmt.Sprintf("j%d", i), "default", "x"))
	}
	eventually(t, 5*time.Second, "5 jobs fetched", func() bool { return h.q.fetchedCount() == 5 })
	aside := fmt.Errorf("%w: clock uncertain", pacer.ErrAside)
	p.aside.Store(&aside)
	p.gate <- struct{}{} // the slot the waiting Take already had: one send
	eventually(t, 5*time.Second, "1 job acked and 4 released", func() bool {
		n := map[string]int{}
		for _, d := range h.q.outcomes() {
			n[d.how]++
		}
		return n["ack"] == 1 && n["release"] == 4
	})
	if err := h.e.Ready(context.Background()); !errors.Is(err, pacer.ErrAside) {
		t.Errorf("Ready while standing aside = %v, want ErrAside", err)
	}
	if sent := rec.order(); len(sent) != 1 {
		t.Errorf("sent %v, want only the job of the slot taken before standing aside", sent)
	}
}

// A job of cost 3 spends three slots.
func TestCostSpendsSlots(t *testing.T) {
	p := &gatePacer{}
	h := start(t, Config{}, twoLanes, p, &recorder{})
	j := job("c3", "default", "x")
	j.Cost = 3
	h.q.Enqueue(context.Background(), j, job("c1", "default", "x"))
	eventually(t, 5*time.Second, "2 jobs acked", func() bool { return h.q.settledCount() == 2 })
	if slots, _ := p.count(); slots != 4 {
		t.Errorf("spent %d slots for jobs of cost 3 and 1, want 4", slots)
	}
}

// Shutdown waits for requests in flight, then releases what it held.
func TestGracefulShutdown(t *testing.T) {
	inSend := make(chan struct{}, 1)
	finish := make(chan struct{})
	s := sink.SenderFunc(func(ctx context.Context, j *queue.Job) error {
		inSend <- struct{}{}
		<-finish
		return nil
	})
	p := &gatePacer{gate: make(chan struct{}, 1)}
	h := start(t, Config{ShutdownTimeout: 10 * time.Second}, twoLanes, p, s)
	for i := range 5 {
		h.q.Enqueue(context.Background(), job(fmt.Sprintf("j%d", i), "default", "x"))
	}
	// Every job is held before the shutdown: one in flight, four to release.
	eventually(t, 5*time.Second, "5 jobs fetched", func() bool { return h.q.fetchedCount() == 5 })
	p.gate <- struct{}{}
	<-inSend
	h.cancel()
	close(finish)
	h.stop(t)
	out := h.q.outcomes()
	acked, released := 0, 0
	for _, d := range out {
		switch d.how {
		case "ack":
			acked++
		case "release":
			released++
		}
	}
	if acked != 1 || released != 4 {
		t.Errorf("after shutdown: %d acked, %d released; want 1 and 4", acked, released)
	}
}

func TestBackoff(t *testing.T) {
	cfg := Config{BackoffMin: time.Second, BackoffMax: 10 * time.Second, Rand: func() float64 { return 1 }}
	cfg.SetDefaults()
	for _, tt := range []struct {
		attempt int
		want    time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {50, 10 * time.Second}} {
		if got := cfg.backoff(tt.attempt); got != tt.want {
			t.Errorf("backoff(%d) = %s, want %s", tt.attempt, got, tt.want)
		}
	}
	cfg.Rand = func() float64 { return 0 }
	if got := cfg.backoff(1); got != 500*time.Millisecond {
		t.Errorf("backoff(1) with jitter 0 = %s, want 500ms (half)", got)
	}
}
