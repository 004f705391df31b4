package pacer

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
)

// offsetClock is the system clock moved by an offset a test sets: waits
// still take real time, and a test can jump past a long bound at once.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.off.Add(int64(d)) }

func TestLocalRate(t *testing.T) {
	for _, tc := range []struct {
		rate, headroom, safety float64
		sharers                int
		want                   float64
	}{
		{300, 0.02, 0.75, 3, 300 * 0.98 * 0.75 / 3},
		{300, 0.02, 0.75, 0, 300 * 0.98 * 0.75}, // unknown count: alone
		{300, -1, 1, 1, 300 / 1.002},            // no headroom: the 1s window's cap takes over
		{10, 0.02, 0.75, 4, (10 + 1 - 4) / (4 * 1.002)},
		{3, 0.02, 0.75, 4, 0}, // more replicas than slots a second: none
	} {
		got := localRate(tc.rate, tc.headroom, tc.safety, tc.sharers, 2*time.Millisecond)
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("localRate(%v, %v, %v, %d): got %v, want %v", tc.rate, tc.headroom, tc.safety, tc.sharers, got, tc.want)
		}
		// The promise: sharers' unaligned schedules keep a 1s window within rate + 1.
		n := max(tc.sharers, 1)
		if perWindow := n * (int(math.Floor(got*1.002)) + 1); got > 0 && perWindow > int(tc.rate)+1 {
			t.Errorf("localRate(%v, ..., %d) = %v puts up to %d in a 1s window; want at most %d", tc.rate, n, got, perWindow, int(tc.rate)+1)
		}
	}
}

// degradedPacer returns a pacer in local mode on srv that has had a reply,
// told of sharers replicas.
func degradedPacer(t *testing.T, srv *testredis.Server, cfg Config, sharers int) *Pacer {
	t.Helper()
	cfg.WhenUnavailable = Local
	p := newClientPacer(t, srv, cfg)
	m := p.Members()
	for i := range sharers {
		if _, err := m.Announce(context.Background(), string(rune('a'+i)), "", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.Stats().Sharers; got != sharers {
		t.Fatalf("sharers after %d announces: got %d", sharers, got)
	}
	return p
}

// take takes one slot or fails the test.
func take(t *testing.T, p *Pacer) Slot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := p.Take(ctx, 1)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return s
}

func hintOf(p *Pacer) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hint
}

// The default, stop, still fails closed when Redis goes away after it
// answered: no local slot, an error wrapping ErrUnavailable.
func TestDegradedStopFailsClosed(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	p := newClientPacer(t, srv, Config{Name: "stop", Rate: 200})
	take(t, p)
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for range 100 { // the slots granted before the kill go first
		if _, err = p.Take(ctx, 1); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Take with Redis down, stop mode: got %v, want ErrUnavailable", err)
	}
	if s := p.Stats(); s.Degraded || s.DegradedEpisodes != 0 || s.LocalGranted != 0 {
		t.Errorf("stats in stop mode: %+v, want no local mode", s.DegradedStats)
	}
}

// A pacer in local mode that never had a reply knows neither the rate nor
// the others: it fails closed too.
func TestDegradedNeedsAReply(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	p := newClientPacer(t, srv, Config{Name: "noreply", Rate: 200, DegradedConfig: DegradedConfig{WhenUnavailable: Local}})
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Take(ctx, 1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Take with no reply ever: got %v, want ErrUnavailable", err)
	}
	if s := p.Stats(); s.Degraded {
		t.Errorf("degraded with no reply ever: %+v", s.DegradedStats)
	}
}

// Local mode grants at the computed rate, after every slot the replica
// held from Redis and one horizon after the failure, makes no Redis call
// per claim, and stops granting after max_degraded (the clock jumps there).
func TestDegradedLocal(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	clk := &offsetClock{}
	const rate, sharers = 200.0, 2
	p := degradedPacer(t, srv, Config{Name: "local", Rate: rate, Clock: clk,
		DegradedConfig: DegradedConfig{MaxDegraded: 30 * time.Minute}}, sharers)
	for range 5 {
		take(t, p)
	}
	held := hintOf(p)
	killed := clk.Now()
	srv.Kill()

	var local []Slot
	for len(local) < 30 {
		s := take(t, p)
		if s.Stamp.After(held) { // a slot of the schedule is never after the hint
			local = append(local, s)
		}
	}
	st := p.Stats()
	want := localRate(rate, p.cfg.Headroom, DefaultDegradedSafety, sharers, p.cfg.MaxLateness)
	if !st.Degraded || st.DegradedEpisodes != 1 || st.LocalRate != want {
		t.Fatalf("stats in local mode: %+v; want degraded, 1 episode, local rate %v", st.DegradedStats, want)
	}
	interval := time.Duration(float64(time.Second) / want)
	if first := local[0]; first.At.Before(killed.Add(p.cfg.Horizon+interval)) || first.Stamp.Sub(held) < interval-10*time.Microsecond {
		t.Errorf("first local slot at %s after the kill, %s after the latest held slot; want at least horizon+interval %s after the kill and one interval %s after the held slot",
			first.At.Sub(killed), first.Stamp.Sub(held), p.cfg.Horizon+interval, interval)
	}
	for i := 1; i < len(local); i++ {
		if gap := local[i].At.Sub(local[i-1].At); gap < interval-time.Microsecond {
			t.Fatalf("local slots %d and %d are %s apart; want at least the local interval %s", i-1, i, gap, interval)
		}
	}
	calls := p.Stats().Calls
	for range 10 {
		take(t, p)
	}
	if c := p.Stats().Calls; c != calls {
		t.Errorf("%d Reserve calls in local mode, want none (probes only)", c-calls)
	}
	if h := hintOf(p); h.Before(local[len(local)-1].Stamp) {
		t.Errorf("hint %s is behind the local slot %s", h, local[len(local)-1].Stamp)
	}

	clk.advance(30 * time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Take(ctx, 1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Take after max_degraded: got %v, want ErrUnavailable", err)
	}
	if st := p.Stats(); !st.Degraded || !st.DegradedStopped {
		t.Errorf("stats after max_degraded: %+v, want degraded and stopped", st.DegradedStats)
	}
	t.Logf("local rate %.1f/s (interval %s); local mode %s after the kill, first local slot %s after it",
		want, interval, st.DegradedSince.Sub(killed).Round(time.Microsecond), local[0].At.Sub(killed).Round(time.Microsecond))
}

// Redis comes back (restarted empty): the pacer hears it within a few
// probes, holds the schedule, and goes back to it; the hint covers the
// local slots and the schedule restarts after them, never among them.
func TestDegradedReturns(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	const rate, sharers = 200.0, 2
	p := degradedPacer(t, srv, Config{Name: "returns", Rate: rate}, sharers)
	take(t, p)
	held := hintOf(p)
	srv.Kill()
	var slots []Slot
	for p.Stats().LocalGranted < 10 {
		slots = append(slots, take(t, p))
	}
	srv.Restart()
	restarted := time.Now()
	deadline := restarted.Add(10 * time.Second)
	for p.Stats().Degraded {
		if time.Now().After(deadline) {
			t.Fatal("still degraded 10s after Redis came back")
		}
		slots = append(slots, take(t, p))
	}
	back := time.Now()
	lastLocal := hintOf(p) // no Reserve since: the latest local slot
	if lastLocal.Before(held) || lastLocal.After(redisNow(t, p).Add(p.cfg.Horizon)) {
		t.Errorf("hint after return %s: want after the held slot %s and within one horizon of Redis now", lastLocal, held)
	}
	calls := p.Stats().Calls
	for p.Stats().Calls == calls {
		slots = append(slots, take(t, p))
	}
	for range 20 { // slots of the schedule now
		slots = append(slots, take(t, p))
	}
	shared := time.Duration(float64(time.Second) / (rate * (1 - p.cfg.Headroom)))
	var firstShared time.Time
	for i, s := range slots {
		if i > 0 && s.Stamp.Sub(slots[i-1].Stamp) < shared-10*time.Microsecond {
			t.Fatalf("slots %d and %d are %s apart on the Redis clock; want at least the schedule's interval %s",
				i-1, i, s.Stamp.Sub(slots[i-1].Stamp), shared)
		}
		if firstShared.IsZero() && s.Stamp.After(lastLocal) {
			firstShared = s.Stamp
		}
	}
	if gap := firstShared.Sub(lastLocal); firstShared.IsZero() || gap < sharers*shared+p.cfg.MaxLateness {
		t.Errorf("first slot of the schedule %s after the last local one; want at least %d intervals + max_lateness", gap, sharers)
	}
	if st := p.Stats(); st.Degraded || st.DegradedEpisodes != 1 {
		t.Errorf("stats after return: %+v, want not degraded, 1 episode", st.DegradedStats)
	}
	t.Logf("back %s after the restart; first slot of the schedule %s after the last local one",
		back.Sub(restarted).Round(time.Millisecond), firstShared.Sub(lastLocal).Round(time.Millisecond))
}

// A throttle while Redis is away holds the local schedule back.
func TestDegradedThrottleHoldsLocally(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	p := degradedPacer(t, srv, Config{Name: "throttle", Rate: 200}, 1)
	take(t, p)
	srv.Kill()
	for p.Stats().LocalGranted == 0 {
		take(t, p)
	}
	p.mu.Lock()
	p.buf = nil // drop what is buffered: the next slot is the local schedule's next
	p.mu.Unlock()
	asked := time.Now()
	if _, err := p.Throttle(context.Background(), 300*time.Millisecond); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Throttle with Redis down: got %v, want ErrUnavailable", err)
	}
	if s := take(t, p); s.At.Before(asked.Add(300 * time.Millisecond)) {
		t.Errorf("local slot %s after a 300ms throttle; want no earlier than 300ms", s.At.Sub(asked))
	}
}
