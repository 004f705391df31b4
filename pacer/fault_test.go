package pacer

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testredis"
)

// TestRedisKilledMidRun kills Redis while clients run: nothing is granted
// while it is down (beyond the slots granted before, at most one horizon
// ahead), waiters get errors wrapping ErrUnavailable, and grants resume
// after a restart without restarting the clients.
func TestRedisKilledMidRun(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	cfg := Config{Name: "killed", Rate: 200}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &stamps{}
	var wg sync.WaitGroup
	pacers := make([]*Pacer, 3)
	for i := range pacers {
		pacers[i] = newClientPacer(t, srv, cfg)
		spin(ctx, pacers[i], rec, &wg)
	}
	eventually(t, 10*time.Second, "no slot granted", func() bool { return len(rec.snapshot()) > 50 })

	srv.Kill()
	// Kill returns once the process is gone. Redis runs on this host, so
	// this clock is its clock: no call ran later than this, and none
	// granted a slot past it plus one horizon. (Reading Redis's time
	// before the kill would miss the calls that ran in between.)
	killed := time.Now()
	eventually(t, 10*time.Second, "no error while Redis is down", func() bool { return rec.errCount() > 3 })
	_, err := pacers[0].Reserve(ctx, 1)
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("Reserve with Redis down: got %v, want ErrUnavailable", err)
	}
	downCount := len(rec.snapshot())

	// Redis runs on this host: its clock is this clock, so the moment
	// before the restart bounds the downtime on the schedule's clock too.
	beforeRestart := time.Now()
	srv.Restart()
	restarted := redisNow(t, pacers[0])
	eventually(t, 10*time.Second, "grants did not resume after restart", func() bool {
		return within(rec.snapshot(), restarted, restarted.Add(time.Hour)) > 20
	})
	cancel()
	wg.Wait()

	list := rec.snapshot()
	if n := within(list, killed.Add(DefaultHorizon+time.Microsecond), beforeRestart); n > 0 {
		t.Errorf("%d slots spent while Redis was down", n)
	}
	t.Logf("before restart %d slots, %d errors while down, %d slots after restart",
		downCount, rec.errCount(), within(list, restarted, restarted.Add(time.Hour)))
}

// TestScriptFlush checks that a SCRIPT FLUSH (or a failover to a replica
// without the scripts) does not stop the pacer.
func TestScriptFlush(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	rdb := srv.Client()
	p, err := New(rdb, Config{Name: "flush", Rate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := p.Reserve(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := p.Reserve(ctx, 1); err != nil || r.Now.IsZero() {
		t.Fatalf("after SCRIPT FLUSH: got %+v, %v; want an answer", r, err)
	}
	if _, err := p.Controls().State(ctx); err != nil {
		t.Fatalf("State after SCRIPT FLUSH: %v", err)
	}
}

// TestFailsClosed checks that a pacer whose Redis cannot be reached grants
// nothing and says so.
func TestFailsClosed(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	p, err := New(rdb, Config{Name: "closed", Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Wait(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Wait with no Redis: got %v, want ErrUnavailable", err)
	}
	if s := p.Stats(); s.Granted != 0 || s.Used != 0 {
		t.Errorf("stats with no Redis: %+v, want nothing granted or used", s)
	}
}

// TestCancelledWaitGivesSlotBack cancels a waiter that holds a future slot
// and checks that the next waiter spends exactly that slot, without asking
// Redis again. The slots are half a second apart, so that the cancelled
// waiter's slot is still ahead when the next waiter comes on a loaded
// machine (at 200ms apart, a run under -race on a busy host once found it
// past its lateness bound and took the slot after it).
func TestCancelledWaitGivesSlotBack(t *testing.T) {
	const interval = 500 * time.Millisecond
	srv := testredis.Start(t, testredis.Options{})
	p := newClientPacer(t, srv, Config{Name: "giveback", Rate: float64(time.Second / interval), Horizon: 5 * interval / 2, Headroom: -1})
	ctx := context.Background()
	if _, err := p.Take(ctx, 1); err != nil { // the first slot goes at once
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := p.Take(actx, 1); done <- err }()
	// Wait until A holds its slot.
	eventually(t, 5*time.Second, "waiter never claimed a slot", func() bool {
		granted := p.Stats().Granted
		p.mu.Lock()
		defer p.mu.Unlock()
		// Two slots are out of the buffer (the first waiter's and A's),
		// the rest is buffered, and no refill is under way.
		return p.refilling == nil && len(p.buf) > 0 && granted-int64(len(p.buf)) == 2
	})
	p.mu.Lock()
	heldByA := p.buf[0].stamp.Add(-interval) // A holds the slot before the buffered one
	p.mu.Unlock()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: got %v, want context.Canceled", err)
	}
	calls := p.Stats().Calls
	got, err := p.Take(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Stamp.Equal(heldByA) {
		t.Errorf("next waiter spent slot %s, want the cancelled waiter's %s", got.Stamp, heldByA)
	}
	if c := p.Stats().Calls; c != calls {
		t.Errorf("next waiter made %d Redis calls, want 0", c-calls)
	}
}

// TestCancelledWaitsNeverSpendTwice runs many waiters with random short
// deadlines on one pacer and checks that no slot is spent twice and that
// the schedule's bound holds.
func TestCancelledWaitsNeverSpendTwice(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	const rate = 200.0
	p := newClientPacer(t, srv, Config{Name: "cancels", Rate: rate})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	rec := &stamps{}
	var wg sync.WaitGroup
	var cancelled int
	var mu sync.Mutex
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for ctx.Err() == nil {
				wctx, wcancel := context.WithTimeout(ctx, time.Duration(1+rng.IntN(30))*time.Millisecond)
				st, err := p.Take(wctx, 1+rng.IntN(2))
				wcancel()
				if err == nil {
					rec.add(st.Stamp)
				} else {
					mu.Lock()
					cancelled++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	list := rec.snapshot()
	for i := 1; i < len(list); i++ {
		if list[i].Equal(list[i-1]) {
			t.Fatalf("slot %s spent twice", list[i])
		}
	}
	if len(list) == 0 || cancelled == 0 {
		t.Fatalf("got %d waits done and %d cancelled; want both", len(list), cancelled)
	}
	s := p.Stats()
	if s.Used > s.Granted {
		t.Errorf("used %d slots of %d granted", s.Used, s.Granted)
	}
	t.Logf("%d waits done, %d cancelled; granted %d, used %d, expired %d", len(list), cancelled, s.Granted, s.Used, s.Expired)
}
