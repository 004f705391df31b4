package queuetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// promptly bounds how long a blocked Fetch may take to notice that its
// context ended or its queue closed.
const promptly = 2 * time.Second

// testConcurrentConsumers: two consumers fetching one lane at once never
// hold the same job at the same time, and every job is acked exactly once.
func testConcurrentConsumers(t *testing.T, h *harness) {
	// A long visibility timeout: this case is about concurrent fetches, not
	// redelivery, and a slow machine must not cause one.
	long := func(c *queue.Config) { c.VisibilityTimeout = time.Minute }
	producer := h.openWith(long)
	const total, batch = 200, 50
	want := map[string]bool{}
	for i := 0; i < total; i += batch {
		jobs := make([]*queue.Job, batch)
		for k := range jobs {
			jobs[k] = newJob(laneLow, i+k)
		}
		for _, r := range enqueue(t, producer, jobs...) {
			want[r.ID] = true
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*eventually)
	defer cancel()
	l := &ledger{holder: map[string]int{}, acked: map[string]int{}, total: total, done: cancel}
	var wg sync.WaitGroup
	for c := range 2 {
		q := h.openWith(long)
		wg.Go(func() { l.consume(ctx, t, q, c) })
	}
	wg.Wait()
	if len(l.acked) != total {
		t.Fatalf("acked %d distinct jobs, want %d", len(l.acked), total)
	}
	for id, n := range l.acked {
		if n != 1 || !want[id] {
			t.Errorf("job %s: acked %d times (enqueued here: %v), want once", id, n, want[id])
		}
	}
	t.Logf("jobs acked per consumer: %v", l.perConsumer)
	waitCounts(t, producer, laneLow, 0, 0, 0)
}

// ledger records which consumer holds which job in testConcurrentConsumers.
type ledger struct {
	mu          sync.Mutex
	holder      map[string]int // job id -> consumer holding it unsettled
	acked       map[string]int // job id -> successful acks
	perConsumer [2]int
	total       int
	done        context.CancelFunc // called when every job is acked
}

// consume fetches and acks jobs as consumer c until ctx ends.
func (l *ledger) consume(ctx context.Context, t *testing.T, q queue.Queue, c int) {
	for {
		ds, err := q.Fetch(ctx, laneLow, 10)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("consumer %d: Fetch: %v", c, err)
			}
			return
		}
		l.mu.Lock()
		for _, d := range ds {
			id := d.Job().ID
			if other, held := l.holder[id]; held {
				t.Errorf("job %s fetched by consumer %d while consumer %d holds it", id, c, other)
			}
			l.holder[id] = c
		}
		l.mu.Unlock()
		for _, d := range ds {
			err := d.Ack(t.Context())
			l.mu.Lock()
			id := d.Job().ID
			delete(l.holder, id)
			if err != nil {
				t.Errorf("consumer %d: Ack of %s: %v", c, id, err)
			} else {
				l.acked[id]++
				l.perConsumer[c]++
			}
			if len(l.acked) == l.total {
				l.done()
			}
			l.mu.Unlock()
		}
	}
}

// testFetchCancel: a Fetch blocked on an empty lane returns promptly with
// ctx.Err() when its context is cancelled or reaches its deadline.
func testFetchCancel(t *testing.T, h *harness) {
	q := h.open()
	const after = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	timer := time.AfterFunc(after, cancel)
	defer timer.Stop()
	start := time.Now()
	ds, err := q.Fetch(ctx, laneLow, 1)
	took := time.Since(start)
	if len(ds) != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("Fetch cancelled on an empty lane: got %d deliveries, %v, want none, context.Canceled", len(ds), err)
	}
	if took > after+promptly {
		t.Errorf("Fetch returned %s after it started, its context cancelled at %s: want within %s", took, after, promptly)
	}

	ctx, cancel = context.WithTimeout(t.Context(), after)
	defer cancel()
	start = time.Now()
	ds, err = q.Fetch(ctx, laneHigh, 5)
	took = time.Since(start)
	if len(ds) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Fetch with a deadline on an empty lane: got %d deliveries, %v, want none, context.DeadlineExceeded", len(ds), err)
	}
	if took > after+promptly {
		t.Errorf("Fetch returned %s after it started, its deadline %s: want within %s", took, after, promptly)
	}
}

// testFetchWakesOnEnqueue: a Fetch blocked on an empty lane returns soon
// after another replica enqueues a job, well before its context's deadline.
func testFetchWakesOnEnqueue(t *testing.T, h *harness) {
	consumer, producer := h.open(), h.open()
	const after = 300 * time.Millisecond
	enqueued := make(chan error, 1)
	timer := time.AfterFunc(after, func() {
		_, err := producer.Enqueue(t.Context(), newJob(laneLow, 1))
		enqueued <- err
	})
	defer timer.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 2*eventually)
	defer cancel()
	start := time.Now()
	ds, err := consumer.Fetch(ctx, laneLow, 1)
	took := time.Since(start)
	if err := <-enqueued; err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch: got %d deliveries, %v, want 1, nil", len(ds), err)
	}
	if bound := after + eventually/3; took > bound {
		t.Errorf("Fetch returned %s after it started, the job enqueued at %s: want within %s, well before its deadline of %s",
			took, after, bound, 2*eventually)
	}
	if err := ds[0].Ack(t.Context()); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// testClose: Close makes a blocked Fetch return ErrClosed promptly, and
// later calls fail with ErrClosed.
func testClose(t *testing.T, h *harness) {
	q := h.open()
	const after = 300 * time.Millisecond
	closed := make(chan error, 1)
	timer := time.AfterFunc(after, func() { closed <- q.Close() })
	defer timer.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), eventually)
	defer cancel()
	start := time.Now()
	ds, err := q.Fetch(ctx, laneLow, 1)
	took := time.Since(start)
	if len(ds) != 0 || !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Fetch blocked during Close: got %d deliveries, %v, want none, ErrClosed", len(ds), err)
	}
	if took > after+promptly {
		t.Errorf("Fetch returned %s after it started, Close called at %s: want within %s", took, after, promptly)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := q.Enqueue(t.Context(), newJob(laneLow, 1)); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Enqueue after Close: got %v, want ErrClosed", err)
	}
	if _, err := q.Fetch(ctx, laneLow, 1); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Fetch after Close: got %v, want ErrClosed", err)
	}
	if err := q.Close(); err != nil && !errors.Is(err, queue.ErrClosed) {
		t.Errorf("second Close: got %v, want nil or ErrClosed", err)
	}
}
