package pacer

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
)

// unreachableRate and unreachableBurst make a schedule no pacer reaches:
// the slots of each batch are all due at once, so the benchmarks measure
// how fast slots can be granted, not the rate.
const (
	unreachableRate  = MaxRate
	unreachableBurst = 100000
)

// BenchmarkSlots compares the batched pacer (Wait, many slots per Redis
// call) with one Redis call per slot (the redis_rate way), on one Redis, at
// a rate neither reaches. It reports slots/s and Redis calls per slot.
func BenchmarkSlots(b *testing.B) {
	srv := testredis.Start(b, testredis.Options{})
	ctx := context.Background()
	b.Run("batched", func(b *testing.B) {
		p, err := New(srv.Client(), Config{Name: "bench-batched", Rate: unreachableRate, Burst: unreachableBurst})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		start := time.Now()
		for b.Loop() {
			if err := p.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		report(b, p, start)
	})
	b.Run("one-call-per-slot", func(b *testing.B) {
		p, err := New(srv.Client(), Config{Name: "bench-single", Rate: unreachableRate, Burst: unreachableBurst})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		start := time.Now()
		for b.Loop() {
			r, err := p.Reserve(ctx, 1)
			if err != nil {
				b.Fatalf("Reserve: %+v, %v", r, err)
			}
			if r.Granted == 0 {
				// The schedule is full for now (the calls outran the
				// rate): a limiter's caller waits RetryAfter and asks
				// again. Only granted slots count in slots/s.
				time.Sleep(r.RetryAfter)
			}
		}
		report(b, p, start)
	})
}

func report(b *testing.B, p *Pacer, start time.Time) {
	s := p.Stats()
	b.ReportMetric(float64(s.Granted)/time.Since(start).Seconds(), "slots/s")
	b.ReportMetric(float64(s.Calls)/float64(s.Granted), "calls/slot")
}

// TestBatchingSavesRoundTrips checks the behaviour behind the benchmark: at
// a rate the pacer never reaches, one waiter needs far fewer Redis calls
// than slots, and lets few of them expire. Its slots may be 20ms late:
// with the default 2ms, a loaded host that ran the only waiter 2ms late
// (the race detector, a busy loop on the other core) let a whole batch
// expire, up to 256 slots at once, 4 runs in 30 over the bound of a tenth.
func TestBatchingSavesRoundTrips(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	p, err := New(srv.Client(), Config{Name: "batching", Rate: unreachableRate, Burst: unreachableBurst,
		MaxLateness: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for range 5000 {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	s := p.Stats()
	if perSlot := float64(s.Calls) / float64(s.Used); perSlot > 0.1 {
		t.Errorf("%d Redis calls for %d slots (%.3f per slot), want at most 0.1", s.Calls, s.Used, perSlot)
	}
	if s.Expired > s.Used/10 {
		t.Errorf("%d slots expired for %d used, want at most a tenth", s.Expired, s.Used)
	}
}

// A replica far below the schedule's rate (no cap in reach) behind a
// link with a millisecond of latency takes its slots in batches sized by
// its own pace, not by the round trips its claims waited for: sized by
// those, every batch was one slot, so every claim waited a round trip
// again (one call per slot at the ceiling on a loaded host).
func TestBatchingAtOwnPaceBehindASlowLink(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	rdb := slowLink(t, srv, time.Millisecond)
	p, err := New(rdb, Config{Name: "pace", Rate: 1e6, Burst: 1000}) // as make bench's ceiling
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2000 {
		if _, err := p.Take(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// 150µs of work per slot, spun rather than slept: a sleep that
		// short lasts a millisecond on a loaded machine.
		for start := time.Now(); time.Since(start) < 150*time.Microsecond; {
		}
	}
	s := p.Stats()
	perSlot := float64(s.Calls) / float64(s.Used)
	t.Logf("%d Redis calls for %d slots (%.3f per slot), forfeited %v", s.Calls, s.Used, perSlot, s.Forfeited)
	if perSlot > 0.5 {
		t.Errorf("%.3f Redis calls per slot, want at most 0.5", perSlot)
	}
}
