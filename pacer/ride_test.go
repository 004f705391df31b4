package pacer

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testredis"
)

// settle makes the clock samples a pacer needs before it rides (Reserve
// calls whose slots go unused, or that are refused), and returns when the
// schedule is idle again: one interval after the last slot granted.
func settle(t *testing.T, p *Pacer) time.Time {
	t.Helper()
	var idle time.Time
	for range asideSamples {
		r, err := p.Reserve(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Granted > 0 {
			idle = r.Slot(r.Granted - 1).Add(r.Interval)
		}
	}
	return idle
}

// rideBehind sends ride in one pipeline behind front, runs it and lands
// it with jobs.
func rideBehind(t *testing.T, rdb *redis.Client, ride *Ride, jobs int, front func(redis.Pipeliner)) {
	t.Helper()
	ctx := context.Background()
	pipe := rdb.Pipeline()
	front(pipe)
	ride.Send(ctx, pipe)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	ride.Landed(jobs)
}

func ping(pipe redis.Pipeliner) { pipe.Ping(context.Background()) }

// buffered is the Redis stamps of the slots p holds.
func buffered(p *Pacer) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Time
	for _, s := range p.buf {
		out = append(out, s.stamp)
	}
	return out
}

// A ride takes a moment of the schedule only while it is idle: granted at
// the caller's first usable moment when nobody holds slots after now
// (also when gaps are kept); refused, writing nothing, when others do; and
// a ride whose read brought no job forfeits its slot as "idle" at once.
func TestRideTakesOnlyAnIdleMoment(t *testing.T) {
	cfg := Config{Rate: 1000, Horizon: 20 * ms}
	a, m := newTimeline(t, cfg)
	b := sharer(t, m, cfg)
	rdb := a.rdb.(*redis.Client)
	settle(t, a) // slots at 0–7ms, unused

	state := func() map[string]string {
		h, err := rdb.HGetAll(context.Background(), key("timeline")).Result()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	// Idle at 10ms: the ride's slot is at 10ms, and it is this replica's.
	m.SetTime(t0.Add(10 * ms))
	ride := a.Ride()
	if ride == nil {
		t.Fatal("no ride from a settled replica that holds no slot")
	}
	rideBehind(t, rdb, ride, 1, ping)
	if got := buffered(a); len(got) != 1 || !got[0].Equal(t0.Add(10*ms)) {
		t.Fatalf("after an idle ride: buffered %v, want one slot at 10ms", got)
	}
	if a.Ride() != nil {
		t.Fatal("a ride offered while the replica holds a slot")
	}
	a.mu.Lock()
	a.buf = nil // spent
	a.mu.Unlock()

	// B holds slots up to 16ms: a ride at 12ms is refused and the state is
	// as it was.
	m.SetTime(t0.Add(12 * ms))
	if r, err := b.Reserve(context.Background(), 5); err != nil || r.Granted != 5 {
		t.Fatalf("b: %+v, %v", r, err)
	}
	before := state()
	rideBehind(t, rdb, a.Ride(), 1, ping)
	if got, after := buffered(a), state(); len(got) != 0 || !maps.Equal(before, after) {
		t.Fatalf("ride while others hold slots ahead: buffered %v, state %v → %v; want nothing granted, nothing written", got, before, after)
	}

	// B leaves gaps (a grant with a stride at 20ms: 20 and 24, gaps at
	// 21–23); at 30ms nothing is held ahead: the ride's slot is at 30ms,
	// through the gaps' walk.
	m.SetTime(t0.Add(20 * ms))
	if r, err := b.reserve(context.Background(), 2, 4*ms, time.Time{}); err != nil || r.Granted != 2 {
		t.Fatalf("b with a stride: %+v, %v", r, err)
	}
	m.SetTime(t0.Add(30 * ms))
	rideBehind(t, rdb, a.Ride(), 1, ping)
	if got := buffered(a); len(got) != 1 || !got[0].Equal(t0.Add(30*ms)) {
		t.Fatalf("ride after a stride grant: buffered %v, want one slot at 30ms", got)
	}
	a.mu.Lock()
	a.buf = nil
	a.mu.Unlock()

	// At 40ms, a ride whose read brought no job: its slot is forfeited as
	// idle, and the schedule moved past it.
	m.SetTime(t0.Add(40 * ms))
	rideBehind(t, rdb, a.Ride(), 0, ping)
	st := a.Stats()
	if got := buffered(a); len(got) != 0 || st.Forfeited[ForfeitIdle] != 1 || st.Rides != 3 {
		t.Fatalf("ride with no job: buffered %v, idle forfeits %d, rides %d; want none, 1, 3", got, st.Forfeited[ForfeitIdle], st.Rides)
	}
	if tat, _ := strconv.ParseFloat(state()["tat"], 64); tat != float64(t0.Add(41*ms).UnixMicro()) {
		t.Fatalf("tat after the idle ride: %v, want 41ms", tat)
	}
}

// No ride from a replica whose clock map is not settled, that holds
// slots, or that has tenant limits.
func TestRideDeclined(t *testing.T) {
	cfg := Config{Rate: 1000, Horizon: 20 * ms}
	a, _ := newTimeline(t, cfg)
	if a.Ride() != nil {
		t.Fatal("a ride before the clock map has its samples")
	}
	settle(t, a)
	if _, err := a.Take(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if len(buffered(a)) > 0 && a.Ride() != nil {
		t.Fatal("a ride while holding slots")
	}
	cfg.Tenants = Tenants{DefaultRate: 10}
	tn, _ := newTimeline(t, cfg)
	settle(t, tn)
	if tn.Ride() != nil {
		t.Fatal("a ride with tenant limits")
	}
}

// On a real Redis, a ride sent behind a blocking pop runs when the pop
// returns: its slot is at the push, not at the pop's start, and the
// replica's next claim is that slot, with no call of its own.
func TestRideComesWithTheJob(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb, other := srv.Client(), srv.Client()
	// A lateness bound the race detector on a loaded machine cannot pass
	// between the reply and Landed (the slot would be forfeited as stale).
	p, err := New(rdb, Config{Name: "ride", Rate: 500, MaxLateness: 100 * time.Millisecond, Headroom: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	idle := settle(t, p)
	eventually(t, time.Second, "the schedule to be idle after the settling calls", func() bool {
		return redisNow(t, p).After(idle)
	})
	ride := p.Ride()
	if ride == nil {
		t.Fatal("no ride from a settled replica that holds no slot")
	}

	pipe := rdb.Pipeline()
	pop := pipe.BLPop(ctx, 5*time.Second, "ride:jobs")
	ride.Send(ctx, pipe)
	done := make(chan error, 1)
	go func() {
		_, err := pipe.Exec(ctx)
		done <- err
	}()
	eventually(t, 5*time.Second, "the pop to block", func() bool {
		info, err := other.InfoMap(ctx, "clients").Result()
		return err == nil && info["Clients"]["blocked_clients"] == "1"
	})
	pushed, err := other.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.LPush(ctx, "ride:jobs", "job").Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := pop.Val(); len(got) != 2 || got[1] != "job" {
		t.Fatalf("pop: %v", got)
	}
	rideReply, rideErr := ride.cmd.Result()
	ride.Landed(1)
	held := buffered(p)
	if len(held) != 1 || held[0].Before(pushed) {
		st := p.Stats()
		t.Fatalf("after the ride: slots %v, want one at or after the push (%s); rides %d, forfeited %v; the ride's reply %v, %v", held, pushed, st.Rides, st.Forfeited, rideReply, rideErr)
	}
	slot, err := p.Take(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slot.Stamp.Equal(held[0]) {
		t.Fatalf("the claim took the slot at %s, want the ride's (%s)", slot.Stamp, held[0])
	}
	if st := p.Stats(); st.Rides != 1 {
		t.Fatalf("rides %d, want 1", st.Rides)
	}
}

// A replica with light demand asks for each job's slot after the job,
// when no ride brought it (at start-up, or a ride refused): that call is
// still out when its fetch blocks again. The next job must still be able
// to bring its slot with it: a ride goes out beside the call, since the
// call brings only the slot of the claim waiting on it. A replica whose
// calls ask for more (a batch) does not ride beside them.
func TestRideBesideTheClaimsCall(t *testing.T) {
	cfg := Config{Rate: 500, Horizon: 20 * ms}
	a, m := newTimeline(t, cfg)
	rdb := a.rdb.(*redis.Client)
	hold := &holdCalls{}
	rdb.AddHook(hold)
	at := settle(t, a)

	// claim takes one slot at the clock's time, its call held in the hook
	// until the returned release is called; it returns once the call is
	// out, and the claim's result comes on the channel.
	claim := func(now time.Time) (release func(), done chan error) {
		m.SetTime(now)
		out, release := hold.arm()
		done = make(chan error, 1)
		go func() {
			_, err := a.Take(context.Background(), 1)
			done <- err
		}()
		select {
		case <-out:
		case err := <-done:
			t.Fatalf("the claim at %v returned (%v) before its call went out", now.Sub(t0), err)
		}
		return release, done
	}

	// Fresh, the replica's batches are not yet known to be of one slot.
	release, done := claim(at)
	if a.Ride() != nil {
		t.Error("a ride beside a call that may bring a batch")
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Jobs 20ms apart, each claim asking after its job: one slot per call.
	for i := 1; i <= 5; i++ {
		release, done := claim(at.Add(time.Duration(i) * 20 * ms))
		release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	calls := a.Stats().Calls

	release, done = claim(at.Add(120 * ms))
	ride := a.Ride()
	if ride == nil {
		t.Fatal("no ride beside the claim's call of a replica taking one slot per call: the next job waits for a call of its own")
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The next job comes 20ms later, its slot with it.
	m.SetTime(at.Add(140 * ms))
	rideBehind(t, rdb, ride, 1, ping)
	if _, err := a.Take(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Rides != 1 || st.Calls != calls+2 {
		t.Fatalf("rides %d, calls %d; want 1 ride and two calls since (the claim's and the ride)", st.Rides, st.Calls-calls)
	}
}

// holdCalls is a go-redis hook that, once armed, holds the next script
// call until released, after telling that it is out.
type holdCalls struct {
	mu      sync.Mutex
	out     chan struct{}
	release chan struct{}
}

// arm makes the next script call wait: out is closed when it is held, and
// release lets it go.
func (h *holdCalls) arm() (out <-chan struct{}, release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.out, h.release = make(chan struct{}), make(chan struct{})
	r := h.release
	return h.out, func() { close(r) }
}

func (h *holdCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			h.mu.Lock()
			out, release := h.out, h.release
			h.out, h.release = nil, nil
			h.mu.Unlock()
			if out != nil {
				close(out)
				<-release
			}
		}
		return next(ctx, cmd)
	}
}

func (h *holdCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// One slow reply among fast ones (a stall of the replica) makes the
// replica's calls ask for slots that much ahead, for eight replies; a
// ride's slot is placed by what most replies took, so the job it comes
// with does not wait for it. Replies slow most of the time still place a
// ride's slot ahead.
func TestRideLeadForgetsOneStall(t *testing.T) {
	cfg := Config{Rate: 1000, Horizon: 50 * ms}
	a, m := newTimeline(t, cfg)
	rdb := a.rdb.(*redis.Client)
	settle(t, a)
	leads := func(ds ...time.Duration) {
		a.mu.Lock()
		defer a.mu.Unlock()
		copy(a.clock.leads[:], ds)
		a.clock.nlead = leadSamples
	}
	rideAt := func(at time.Duration) time.Time {
		t.Helper()
		m.SetTime(t0.Add(at))
		ride := a.Ride()
		if ride == nil {
			t.Fatalf("no ride at %v", at)
		}
		// Send reads the lead; Landed adds the ride's own (zero here).
		rideBehind(t, rdb, ride, 1, ping)
		got := buffered(a)
		if len(got) != 1 {
			t.Fatalf("ride at %v: buffered %v, want one slot", at, got)
		}
		a.mu.Lock()
		a.buf = nil
		a.mu.Unlock()
		return got[0]
	}

	const fast = 100 * time.Microsecond
	// Seven replies in 0.1ms, one in 6ms.
	leads(fast, fast, 6*ms, fast, fast, fast, fast, fast)
	if got := rideAt(100 * ms); !got.Equal(t0.Add(100 * ms)) {
		t.Errorf("after one stall the ride's slot is %v after its job, want at it", got.Sub(t0.Add(100*ms)))
	}
	// A call that is not a ride still leads by the stall (lead − lateness/2).
	leads(fast, fast, 6*ms, fast, fast, fast, fast, fast)
	m.SetTime(t0.Add(200 * ms))
	r, err := a.reserve(context.Background(), 1, 0, time.Time{})
	if err != nil || r.Granted != 1 || !r.Slot(0).Equal(t0.Add(205*ms)) {
		t.Errorf("a call after one stall: %+v, %v; want its slot 5ms ahead", r, err)
	}
	// Slow most of the time: the ride's slot is placed ahead too.
	leads(6*ms, 6*ms, 6*ms, 6*ms, 6*ms, fast, fast, fast)
	if got := rideAt(300 * ms); !got.Equal(t0.Add(305 * ms)) {
		t.Errorf("replies slow most of the time: the ride's slot is %v after its job, want 5ms", got.Sub(t0.Add(300*ms)))
	}
}
