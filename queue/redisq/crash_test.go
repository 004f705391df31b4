package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

// producer enqueues jobs one at a time until its context ends, recording
// which enqueues Redis acknowledged and how many failed.
type producer struct {
	mu       sync.Mutex
	acked    map[string]bool
	failures int
}

func (p *producer) run(ctx context.Context, q queue.Enqueuer) {
	for i := 0; ctx.Err() == nil; i++ {
		j := &queue.Job{Key: fmt.Sprintf("crash-%d", i), Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
		opCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		res, err := q.Enqueue(opCtx, j)
		cancel()
		p.mu.Lock()
		if err == nil {
			p.acked[res[0].ID] = true
		} else {
			p.failures++
		}
		p.mu.Unlock()
		if err != nil { // Redis is down: back off instead of spinning
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// counts returns the acknowledged enqueues and the failed ones so far.
func (p *producer) counts() (acked, failures int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked), p.failures
}

// waitFor polls cond until it holds, failing t after 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, 10*time.Millisecond, what, cond)
}

// TestCrashKeepsAcknowledgedEnqueues kills Redis (AOF, fsync always) with
// SIGKILL in the middle of a run of enqueues, restarts it, and checks that
// every enqueue Redis acknowledged, before or after the crash, is still
// there to be fetched.
func TestCrashKeepsAcknowledgedEnqueues(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{AOF: true})
	testredis.RequireReal(t, srv)
	cfg := queue.Config{Name: "crash", Lanes: []string{"only"}, VisibilityTimeout: time.Minute}
	p := &producer{acked: map[string]bool{}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	q := open(t, srv, cfg)
	go func() { defer close(done); p.run(ctx, q) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "300 enqueues before the crash", func() bool { n, _ := p.counts(); return n >= 300 })
	srv.Kill()
	beforeRestart, _ := p.counts()
	waitFor(t, "an enqueue failing while Redis is down", func() bool { _, f := p.counts(); return f > 0 })
	srv.Restart()
	waitFor(t, "300 enqueues after the restart", func() bool { n, _ := p.counts(); return n >= beforeRestart+300 })
	cancel()
	<-done

	acked, failures := p.counts()
	stored := drain(t, open(t, srv, cfg), "only")
	lost := 0
	for id := range p.acked {
		if !stored[id] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged enqueues lost in the crash", lost, acked)
	}
	if len(stored) < acked {
		t.Errorf("stored %d jobs, fewer than the %d acknowledged", len(stored), acked)
	}
	t.Logf("acknowledged %d (%d before the kill), failed %d while down, stored %d", acked, beforeRestart, failures, len(stored))
}

// drain fetches and acks every job of lane, returning their ids.
func drain(t *testing.T, q queue.Queue, lane string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		ds, err := q.Fetch(ctx, lane, 100)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return ids
		}
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		for _, d := range ds {
			if ids[d.Job().ID] {
				t.Errorf("job %s fetched twice", d.Job().ID)
			}
			ids[d.Job().ID] = true
			if err := d.Ack(t.Context()); err != nil {
				t.Fatalf("Ack: %v", err)
			}
		}
	}
}
