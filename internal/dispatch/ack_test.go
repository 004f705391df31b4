package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

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
// one the queue refuses as settled is sent once.
func TestAckSentAgainAfterAFailure(t *testing.T) {
	q := newMemQueue("default")
	e, err := New(Config{}, Deps{Queue: q, Pacer: &gatePacer{}, Priority: twoLanes,
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
}
