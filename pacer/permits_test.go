package pacer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
)

// Three replicas' workers never hold more permits at once than the cap,
// and all of them get permits in turn.
func TestPermitsCap(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	const limit = 5
	var open, maxOpen, done atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var runs, workers sync.WaitGroup
	for r := range 3 {
		p, err := NewPermits(srv.Client(), "permits", fmt.Sprintf("r%d", r), limit, time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs.Go(func() { p.Run(ctx) })
		for range 4 {
			workers.Go(func() {
				for range 20 {
					release, err := p.Acquire(ctx)
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					n := open.Add(1)
					for m := maxOpen.Load(); n > m && !maxOpen.CompareAndSwap(m, n); m = maxOpen.Load() {
					}
					time.Sleep(2 * time.Millisecond) // a request open at the provider
					open.Add(-1)
					release()
					done.Add(1)
				}
			})
		}
	}
	workers.Wait()
	cancel()
	runs.Wait()
	if maxOpen.Load() > limit || done.Load() != 3*4*20 {
		t.Errorf("most open at once %d (cap %d), requests done %d (want 240)", maxOpen.Load(), limit, done.Load())
	}
	t.Logf("most open at once: %d of %d", maxOpen.Load(), limit)
}

// The permits of a replica that stops renewing (it died) come back when
// their lease ends, not before.
func TestPermitsOfADeadReplicaComeBack(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	const lease = 500 * time.Millisecond
	dead, err := NewPermits(srv.Client(), "permits", "dead", 2, lease, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if _, err := dead.Acquire(ctx); err != nil { // never released, never renewed
			t.Fatal(err)
		}
	}
	start := time.Now()
	live, err := NewPermits(srv.Client(), "permits", "live", 2, lease, nil)
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := live.Acquire(actx); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < lease-50*time.Millisecond {
		t.Errorf("got a permit after %s; want none before the dead replica's lease (%s) ended", waited, lease)
	}
}
