package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// flakyAcker fails the first attempt of some acks, as a backend does
// while it fails over, and refuses others as settled.
type flakyAcker struct {
	mu       sync.Mutex
	attempts map[string]int
	acked    map[string]bool
	failOnce map[string]bool // a transient error on the first attempt
	settled  map[string]bool // queue.ErrSettled on every attempt
}

func (f *flakyAcker) AckBatch(_ context.Context, ds []queue.Delivery) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	errs := make([]error, len(ds))
	for i, d := range ds {
		id := d.Job().ID
		f.attempts[id]++
		switch {
		case f.settled[id]:
			errs[i] = fmt.Errorf("ack %s: %w", id, queue.ErrSettled)
		case f.failOnce[id] && f.attempts[id] == 1:
			errs[i] = errors.New("connection reset by peer")
		default:
			f.acked[id] = true
		}
	}
	return errs
}

// An ack that fails for a reason that may pass is sent again and lands;
// one the queue refuses as settled is sent once. Each attempt counts in
// sluice_ack_batches_total.
func TestAckSentAgainAfterAFailure(t *testing.T) {
	q := newMemQueue("default")
	m, err := NewMetrics(prometheus.NewPedanticRegistry(), Sources{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{}, Deps{Queue: q, Pacer: &gatePacer{}, Priority: twoLanes, Metrics: m,
		Sink: sink.SenderFunc(func(context.Context, *queue.Job) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	f := &flakyAcker{attempts: map[string]int{}, acked: map[string]bool{},
		failOnce: map[string]bool{"b": true}, settled: map[string]bool{"c": true}}
	var batch []queue.Delivery
	for _, id := range []string{"a", "b", "c"} {
		batch = append(batch, &memDelivery{q: q, job: job(id, "default", "x")})
	}
	e.ackBatch(f, batch)
	if !f.acked["a"] || !f.acked["b"] || f.acked["c"] {
		t.Errorf("acked %v; want a and b (b on its second attempt), not c", f.acked)
	}
	if f.attempts["a"] != 1 || f.attempts["b"] != 2 || f.attempts["c"] != 1 {
		t.Errorf("attempts %v; want a 1, b 2, c 1 (a settled job is not acked again)", f.attempts)
	}
	if got := testutil.ToFloat64(m.ackBatches); got != 2 {
		t.Errorf("sluice_ack_batches_total = %v, want 2 (the batch, then b again)", got)
	}
}

// gatedAcker holds each batch until the test lets it go, and tells the
// test each batch's size when it begins.
type gatedAcker struct {
	began chan int      // the size of each batch, as it begins
	go_   chan struct{} // one receive lets one batch end
}

func (g *gatedAcker) AckBatch(_ context.Context, ds []queue.Delivery) []error {
	g.began <- len(ds)
	<-g.go_ // not the attempt's timeout: the test says when it ends
	return make([]error, len(ds))
}

// ackLoopWith runs e's ack loop on a until the test ends.
func ackLoopWith(t *testing.T, e *Engine, a queue.BatchAcker) {
	e.acks = make(chan queue.Delivery, 256)
	done := make(chan struct{})
	go func() { defer close(done); e.ackLoop(a) }()
	t.Cleanup(func() { close(e.acks); <-done })
}

// While the backend answers, acks queue up behind the open batch and go
// together in the next: one round trip (a script call on Redis) for them
// all, not one batch each.
func TestAcksQueueBehindAnOpenBatch(t *testing.T) {
	e, err := New(Config{}, Deps{Queue: newMemQueue("default"), Pacer: &gatePacer{}, Priority: twoLanes,
		Sink: sink.SenderFunc(func(context.Context, *queue.Job) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	e.ackStall = time.Hour // the open batch never counts as stalled here
	g := &gatedAcker{began: make(chan int, 8), go_: make(chan struct{})}
	ackLoopWith(t, e, g)
	e.acks <- &memDelivery{job: job("first", "default", "x")}
	if n := <-g.began; n != 1 {
		t.Fatalf("first batch: %d acks, want 1 (a lone ack goes at once)", n)
	}
	e.acks <- &memDelivery{job: job("j0", "default", "x")}
	eventually(t, 10*time.Second, "the loop takes the second ack", func() bool { return len(e.acks) == 0 })
	for i := 1; i < 50; i++ { // they come while the loop holds j0
		e.acks <- &memDelivery{job: job(fmt.Sprint("j", i), "default", "x")}
	}
	g.go_ <- struct{}{} // the first batch ends
	if n := <-g.began; n != 50 {
		t.Errorf("second batch: %d acks, want the 50 that queued behind the first", n)
	}
	close(g.go_)
}

// A batch whose answer is slow (a failover) holds up only itself: past
// ackStall, the next batch opens beside it.
func TestAckBatchBesideAStalledOne(t *testing.T) {
	e, err := New(Config{}, Deps{Queue: newMemQueue("default"), Pacer: &gatePacer{}, Priority: twoLanes,
		Sink: sink.SenderFunc(func(context.Context, *queue.Job) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	e.ackStall = time.Millisecond
	g := &gatedAcker{began: make(chan int, 8), go_: make(chan struct{})}
	ackLoopWith(t, e, g)
	e.acks <- &memDelivery{job: job("stuck", "default", "x")}
	<-g.began // open, and never answered until the end
	e.acks <- &memDelivery{job: job("next", "default", "x")}
	select {
	case n := <-g.began:
		if n != 1 {
			t.Errorf("second batch: %d acks, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no second batch while the first stayed open")
	}
	close(g.go_)
}

// After a batch of ackLingerFrom acks or more (a busy replica), the next
// batch waits for company up to ackLinger, taking acks as they come so
// that no sender waits for room, and goes when full; after a small batch
// (light load) the next goes at once.
func TestAcksLingerAfterABigBatch(t *testing.T) {
	newEngine := func() *Engine {
		e, err := New(Config{}, Deps{Queue: newMemQueue("default"), Pacer: &gatePacer{}, Priority: twoLanes,
			Sink: sink.SenderFunc(func(context.Context, *queue.Job) error { return nil })})
		if err != nil {
			t.Fatal(err)
		}
		e.ackStall = 0          // no batch waits for the one before to answer
		e.ackLinger = time.Hour // a lingering batch ends only when full
		return e
	}
	began := func(g *gatedAcker) int {
		select {
		case n := <-g.began:
			return n
		case <-time.After(10 * time.Second):
			t.Fatal("no batch within 10s")
			return 0
		}
	}
	t.Run("after a small batch", func(t *testing.T) {
		e := newEngine()
		g := &gatedAcker{began: make(chan int, 8), go_: make(chan struct{}, 8)}
		ackLoopWith(t, e, g)
		t.Cleanup(func() { close(g.go_) })
		e.acks <- &memDelivery{job: job("first", "default", "x")}
		if n := began(g); n != 1 {
			t.Fatalf("first batch: %d acks, want 1", n)
		}
		e.acks <- &memDelivery{job: job("second", "default", "x")}
		if n := began(g); n != 1 {
			t.Errorf("second batch: %d acks, want 1, at once", n)
		}
	})
	t.Run("after a big batch", func(t *testing.T) {
		e := newEngine()
		g := &gatedAcker{began: make(chan int, 8), go_: make(chan struct{}, 8)}
		// Room for fewer acks than a batch holds: the lingering loop must
		// take them as they come, or the senders (here, the test) wait.
		e.acks = make(chan queue.Delivery, 2*ackLingerFrom)
		for i := range ackLingerFrom { // queued before the loop starts: one batch
			e.acks <- &memDelivery{job: job(fmt.Sprint("b", i), "default", "x")}
		}
		done := make(chan struct{})
		go func() { defer close(done); e.ackLoop(g) }()
		t.Cleanup(func() { close(e.acks); close(g.go_); <-done })
		if n := began(g); n != ackLingerFrom {
			t.Fatalf("first batch: %d acks, want %d", n, ackLingerFrom)
		}
		for i := range maxAckBatch {
			select {
			case e.acks <- &memDelivery{job: job(fmt.Sprint("k", i), "default", "x")}:
			case <-time.After(10 * time.Second):
				t.Fatalf("ack %d waited 10s for room: the loop does not take acks while it lingers", i)
			}
		}
		if n := began(g); n != maxAckBatch {
			t.Errorf("second batch: %d acks, want %d: after a batch of %d it takes the acks that come, until full",
				n, maxAckBatch, ackLingerFrom)
		}
	})
}
