package natsq_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/queue"
)

// TestRestartKeepsAcknowledgedEnqueues restarts the NATS server while a
// producer enqueues (single jobs and batches of 10) and checks that every
// job whose Enqueue returned without error is delivered afterwards.
func TestRestartKeepsAcknowledgedEnqueues(t *testing.T) {
	srv := testnats.Start(t)
	cfg := queue.Config{Name: "restart", Lanes: []string{"only"}, VisibilityTimeout: time.Minute}
	q, _ := open(t, srv.Conn(), cfg)

	before, after := make(chan struct{}), make(chan struct{})
	p := &producer{acked: map[string]bool{}, reached: map[int]chan struct{}{100: before, 250: after}}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { p.run(ctx, q) })
	t.Cleanup(func() { stop(); wg.Wait() })

	await(t, before, "100 acknowledged enqueues before the restart")
	srv.Restart()
	t.Logf("restarted after %d acknowledged enqueues", p.count())
	await(t, after, "250 acknowledged enqueues")
	stop()
	wg.Wait()
	t.Logf("enqueues: %d acknowledged, %d failed", len(p.acked), p.failed)

	seen := drainLane(t, q, "only", p.acked)
	for id := range p.acked {
		if !seen[id] {
			t.Errorf("job %s: enqueue acknowledged, never delivered after the restart", id)
		}
	}
	if extra := len(seen) - len(p.acked); extra > 0 {
		t.Logf("%d jobs whose enqueue failed were stored anyway (allowed: at least once)", extra)
	}
}

// producer enqueues until its context ends and records the acknowledged
// job ids.
type producer struct {
	mu      sync.Mutex
	acked   map[string]bool
	failed  int
	reached map[int]chan struct{} // closed when that many enqueues were acknowledged
}

func (p *producer) run(ctx context.Context, q queue.Queue) {
	for i := 0; ctx.Err() == nil; i++ {
		jobs := []*queue.Job{{Payload: fmt.Appendf(nil, `{"n":%d}`, i)}}
		if i%2 == 1 {
			for k := range 9 {
				jobs = append(jobs, &queue.Job{Payload: fmt.Appendf(nil, `{"n":%d,"k":%d}`, i, k)})
			}
		}
		ectx, cancel := context.WithTimeout(ctx, 2*time.Second)
		res, err := q.Enqueue(ectx, jobs...)
		cancel()
		p.record(res, err)
	}
}

func (p *producer) record(res []queue.EnqueueResult, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failed++
		return
	}
	for _, r := range res {
		p.acked[r.ID] = true
	}
	for n, ch := range p.reached {
		if len(p.acked) >= n {
			close(ch)
			delete(p.reached, n)
		}
	}
}

func (p *producer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// await waits for ch to close, failing the test after a generous bound.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not within 30s", what)
	}
}

// drainLane fetches and acks lane until every job in want was seen or a
// bound passes, and returns the ids seen. Fetch errors right after a
// restart (JetStream still starting) are retried.
func drainLane(t *testing.T, q queue.Queue, lane string, want map[string]bool) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	seen := map[string]bool{}
	missing := len(want)
	for missing > 0 && ctx.Err() == nil {
		ds, err := q.Fetch(ctx, lane, 100)
		if err != nil {
			t.Logf("Fetch: %v", err)
			pause(ctx, 50*time.Millisecond)
			continue
		}
		for _, d := range ds {
			id := d.Job().ID
			if want[id] && !seen[id] {
				missing--
			}
			seen[id] = true
			if err := d.Ack(ctx); err != nil {
				t.Errorf("Ack %s: %v", id, err)
			}
		}
	}
	return seen
}

// pause waits d or until ctx ends: the interval of a bounded retry loop.
func pause(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}
