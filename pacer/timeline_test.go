package pacer

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// These tests drive the schedule script on miniredis, whose TIME follows
// SetTime, so every row runs at an exact Redis time. Rows are a timeline:
// at Redis time t0+at, ask for n slots; want granted slots, the first at
// t0+first (clamped to now), or a retry after retry.

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

type step struct {
	at      time.Duration
	n       int
	granted int
	first   time.Duration // checked when granted > 0
	retry   time.Duration // checked when granted == 0
}

// redisTime is a miniredis whose TIME the test sets, and the replica's
// clock (Config.Clock) reading the same time, as if the round trip took
// no time at all.
type redisTime struct {
	*miniredis.Miniredis
	mu  sync.Mutex
	now time.Time
}

// SetTime sets the Redis time and the replica's clock to t.
func (r *redisTime) SetTime(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Miniredis.SetTime(t)
	r.now = t
}

// Now is the replica's clock.
func (r *redisTime) Now() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

func newTimeline(t *testing.T, cfg Config) (*Pacer, *redisTime) {
	t.Helper()
	m := &redisTime{Miniredis: miniredis.RunT(t), now: t0}
	m.SetTime(t0)
	if cfg.Name == "" {
		cfg.Name = "timeline"
	}
	// An existing, idle schedule: a fresh one starts one horizon ahead
	// (TestScheduleStartsAfterStateLoss).
	m.HSet(key(cfg.Name), "tat", "1", "last_now", "1")
	return sharer(t, m, cfg), m
}

// sharer is a replica on m's schedule (the timeline's, unless cfg names
// another), on a client of its own, its clock m's.
func sharer(t *testing.T, m *redisTime, cfg Config) *Pacer {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	cfg.Clock = m
	if cfg.Name == "" {
		cfg.Name = "timeline"
	}
	if cfg.Headroom == 0 {
		cfg.Headroom = -1 // timelines count exact intervals
	}
	p, err := New(rdb, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func run(t *testing.T, p *Pacer, m *redisTime, steps []step) {
	t.Helper()
	for i, s := range steps {
		m.SetTime(t0.Add(s.at))
		r, err := p.Reserve(context.Background(), s.n)
		if err != nil {
			t.Fatalf("step %d (at %s, n %d): %v", i, s.at, s.n, err)
		}
		if r.Granted != s.granted {
			t.Fatalf("step %d (at %s, n %d): granted %d, want %d", i, s.at, s.n, r.Granted, s.granted)
		}
		if s.granted > 0 {
			if got, want := r.Slot(0), maxTime(t0.Add(s.first), t0.Add(s.at)); !got.Equal(want) {
				t.Errorf("step %d (at %s): first slot at t0+%s, want t0+%s", i, s.at, got.Sub(t0), want.Sub(t0))
			}
		} else if r.RetryAfter != s.retry {
			t.Errorf("step %d (at %s): retry after %s, want %s", i, s.at, r.RetryAfter, s.retry)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

const ms = time.Millisecond

func TestScheduleEvenSpacing(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 10, Horizon: 50 * ms})
	run(t, p, m, []step{
		{at: 0, n: 1, granted: 1, first: 0},
		{at: 0, n: 5, granted: 0, retry: 50 * ms},        // next slot at 100ms, beyond the horizon
		{at: 60 * ms, n: 5, granted: 1, first: 100 * ms}, // only one slot within 110ms
		{at: 60 * ms, n: 1, granted: 0, retry: 90 * ms},  // next at 200ms, fits from 150ms
		{at: 150 * ms, n: 1, granted: 1, first: 200 * ms},
		{at: 1000 * ms, n: 3, granted: 1, first: 1000 * ms}, // idle: burst 1 gives one now
	})
}

func TestScheduleBurstAfterIdle(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 10, Burst: 3, Horizon: 50 * ms})
	run(t, p, m, []step{
		{at: 0, n: 5, granted: 3, first: -200 * ms}, // three at once, clamped to now
		{at: 0, n: 1, granted: 0, retry: 50 * ms},
		{at: 10 * time.Second, n: 10, granted: 3, first: 10*time.Second - 200*ms},
	})
}

func TestScheduleHorizonBoundsBatch(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 1000, Horizon: 50 * ms})
	run(t, p, m, []step{
		{at: 0, n: 500, granted: 51, first: 0}, // slots at 0, 1, ..., 50ms
		{at: 0, n: 500, granted: 0, retry: 1 * ms},
		{at: 10 * ms, n: 500, granted: 10, first: 51 * ms},
		{at: 10 * ms, n: 5, granted: 0, retry: 5 * ms}, // come back when five fit
	})
}

func TestScheduleClockGoesBack(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 10, Horizon: 50 * ms})
	run(t, p, m, []step{
		{at: 1000 * ms, n: 1, granted: 1, first: 1000 * ms}, // next free slot at 1100ms
		// Redis time jumps back 500ms: the next free slot is still 100ms
		// away, not 600ms of free slots.
		{at: 500 * ms, n: 3, granted: 0, retry: 50 * ms},
		{at: 560 * ms, n: 3, granted: 1, first: 600 * ms},
		{at: 560 * ms, n: 1, granted: 0, retry: 90 * ms},
	})
}

func TestScheduleClockGoesForward(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 10, Burst: 2, Horizon: 50 * ms})
	run(t, p, m, []step{
		{at: 0, n: 1, granted: 1, first: -100 * ms},
		// Redis time jumps an hour ahead: at most the burst, as after idling.
		{at: time.Hour, n: 100, granted: 2, first: time.Hour - 100*ms},
		{at: time.Hour, n: 1, granted: 0, retry: 50 * ms},
	})
}

func TestScheduleOverrides(t *testing.T) {
	ctx := context.Background()
	p, m := newTimeline(t, Config{Rate: 10, Horizon: 50 * ms})
	run(t, p, m, []step{{at: 0, n: 1, granted: 1, first: 0}})
	m.SetTime(t0)
	if err := p.Controls().SetRate(ctx, 5); err != nil {
		t.Fatal(err)
	}
	run(t, p, m, []step{
		{at: 100 * ms, n: 1, granted: 1, first: 100 * ms}, // tat was set at 10/s
		{at: 250 * ms, n: 1, granted: 1, first: 300 * ms}, // now 200ms apart
	})
	if err := p.Controls().ClearOverrides(ctx); err != nil {
		t.Fatal(err)
	}
	run(t, p, m, []step{
		{at: 290 * ms, n: 2, granted: 0, retry: 160 * ms}, // next free slot at 500ms
		{at: 450 * ms, n: 2, granted: 1, first: 500 * ms},
		{at: 560 * ms, n: 2, granted: 1, first: 600 * ms}, // back to 100ms apart
	})
	for _, bad := range []float64{0, 1e-7, math.NaN(), math.Inf(1)} {
		if err := p.Controls().SetRate(ctx, bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("SetRate(%v): got %v, want ErrInvalidConfig", bad, err)
		}
		if err := p.Controls().SetTenantRate(ctx, "acme", bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("SetTenantRate(%v): got %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func TestSchedulePauseResume(t *testing.T) {
	ctx := context.Background()
	p, m := newTimeline(t, Config{Rate: 10, Horizon: 50 * ms})
	m.SetTime(t0)
	if err := p.Controls().Pause(ctx); err != nil {
		t.Fatal(err)
	}
	m.SetTime(t0.Add(10 * time.Second))
	r, err := p.Reserve(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if r.Granted != 0 || !r.Paused || r.RetryAfter != pausePoll {
		t.Fatalf("paused: got %+v, want nothing granted, Paused, retry %s", r, pausePoll)
	}
	if err := p.Controls().Resume(ctx); err != nil {
		t.Fatal(err)
	}
	run(t, p, m, []step{{at: 10 * time.Second, n: 5, granted: 1, first: 10 * time.Second}})
}

func TestScheduleThrottle(t *testing.T) {
	ctx := context.Background()
	p, m := newTimeline(t, Config{Rate: 10, Burst: 5, Horizon: 50 * ms})
	run(t, p, m, []step{{at: 0, n: 1, granted: 1, first: -400 * ms}})
	m.SetTime(t0.Add(100 * ms))
	until, err := p.Throttle(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(1100 * ms); !until.Equal(want) {
		t.Fatalf("throttled until t0+%s, want t0+%s", until.Sub(t0), want.Sub(t0))
	}
	m.SetTime(t0.Add(200 * ms))
	if _, err := p.Throttle(ctx, 100*ms); err != nil { // shorter: must not shorten
		t.Fatal(err)
	}
	run(t, p, m, []step{
		{at: 500 * ms, n: 5, granted: 0, retry: 550 * ms},
		{at: 1049 * ms, n: 5, granted: 0, retry: 1 * ms},
		// No burst straight after a throttle: one slot at its end.
		{at: 1050 * ms, n: 5, granted: 1, first: 1100 * ms},
	})
	st, err := p.Controls().State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(1100 * ms); !st.ThrottledUntil.Equal(want) {
		t.Errorf("State.ThrottledUntil = t0+%s, want t0+%s", st.ThrottledUntil.Sub(t0), want.Sub(t0))
	}
}

func TestState(t *testing.T) {
	ctx := context.Background()
	p, m := newTimeline(t, Config{Rate: 10, Burst: 2})
	m.SetTime(t0)
	st, err := p.Controls().State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.EffectiveRate != 10 || st.EffectiveBurst != 2 || st.Paused || st.RateOverride != 0 {
		t.Errorf("fresh State = %+v, want rate 10, burst 2, no override, not paused", st)
	}
	if err := p.Controls().SetRate(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if err := p.Controls().SetBurst(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := p.Controls().Pause(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = p.Controls().State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ConfiguredRate != 10 || st.EffectiveRate != 4 || st.EffectiveBurst != 3 || !st.Paused {
		t.Errorf("State = %+v, want configured 10, effective 4, burst 3, paused", st)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want []string // keys named in the error
	}{
		{Config{Name: "sms", Rate: 400}, nil},
		{Config{Name: "", Rate: 0}, []string{"pacer.name", "pacer.rate"}},
		{Config{Name: "a b", Rate: -1, Burst: -1, Horizon: -1, MaxBatch: -1, MaxLateness: -1, Headroom: 0.5},
			[]string{"pacer.name", "pacer.rate", "pacer.burst", "pacer.horizon", "pacer.max_batch", "pacer.max_lateness", "pacer.headroom"}},
		// Values that pass a plain comparison: NaN fails every one, a tiny
		// rate's interval overflows a time.Duration, a horizon under 1ms
		// rounds to nothing in the scripts.
		{Config{Name: "sms", Rate: math.NaN()}, []string{"pacer.rate"}},
		{Config{Name: "sms", Rate: 1e-7}, []string{"pacer.rate"}},
		{Config{Name: "sms", Rate: math.Inf(1)}, []string{"pacer.rate"}},
		{Config{Name: "sms", Rate: MinRate}, nil},
		{Config{Name: "sms", Rate: 400, Headroom: math.NaN()}, []string{"pacer.headroom"}},
		{Config{Name: "sms", Rate: 400, Horizon: 500 * time.Microsecond}, []string{"pacer.horizon"}},
		{Config{Name: "sms", Rate: 400, Tenants: Tenants{DefaultRate: math.NaN()}}, []string{"pacer.tenants.default_rate"}},
		{Config{Name: "sms", Rate: 400, Tenants: Tenants{DefaultRate: 1e-9}}, []string{"pacer.tenants.default_rate"}},
		{Config{Name: "sms", Rate: 400, Tenants: Tenants{Rates: map[string]float64{"acme": math.NaN()}}}, []string{"pacer.tenants.rates.acme"}},
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, tt := range tests {
		_, err := New(rdb, tt.cfg)
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("New(%+v): got %v, want nil", tt.cfg, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v): got %v, want ErrInvalidConfig", tt.cfg, err)
			continue
		}
		for _, k := range tt.want {
			if !strings.Contains(err.Error(), k) {
				t.Errorf("New(%+v): error %q does not name %s", tt.cfg, err, k)
			}
		}
	}
}

func TestReplicas(t *testing.T) {
	ctx := context.Background()
	p, m := newTimeline(t, Config{Rate: 10})
	m.SetTime(t0)
	if _, err := p.Members().Announce(ctx, "a", "in_flight=3", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	m.SetTime(t0.Add(5 * time.Second))
	if _, err := p.Members().Announce(ctx, "b", "in_flight=0", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := p.Members().Replicas(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("replicas = %+v, want a and b", got)
	}
	m.SetTime(t0.Add(12 * time.Second)) // a is silent for 12s, b for 7s
	got, err = p.Members().Replicas(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// A pacer's announces add its clock's precision to the report.
	if len(got) != 1 || got[0].ID != "b" || got[0].Report != "in_flight=0 clock=ok" || !got[0].LastSeen.Equal(t0.Add(5*time.Second)) {
		t.Errorf("replicas after 12s = %+v, want only b, seen at t0+5s, reporting in_flight=0 clock=ok", got)
	}
}

// Slots of the schedule that pass with no call asking for them lapse, and
// the call that moves the schedule past them counts them, once; with a
// burst, the slots an idle schedule lets go at once are not counted. A
// schedule that stays ahead of its callers lapses nothing.
func TestScheduleCountsLapsedSlots(t *testing.T) {
	for _, tc := range []struct {
		burst  int
		lapsed float64 // in the idle second at 10/s, slot times 0, 100ms, ...
	}{{1, 9}, {3, 7}} {
		p, m := newTimeline(t, Config{Rate: 10, Burst: tc.burst, Horizon: 50 * ms})
		reserve := func(at time.Duration, n int) Reservation {
			t.Helper()
			m.SetTime(t0.Add(at))
			r, err := p.Reserve(context.Background(), n)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		reserve(0, tc.burst) // the timeline's schedule was idle since the epoch
		before := p.Stats().Lapsed
		for _, at := range []time.Duration{0, 40 * ms, 100 * ms} { // ahead of them, or just in time
			if r := reserve(at, 1); r.Lapsed != 0 {
				t.Errorf("burst %d: at %s the schedule is not behind, got %v lapsed", tc.burst, at, r.Lapsed)
			}
		}
		// The last slot went at 100ms: tat is 200ms, and a call at 1.1s
		// finds 9 slots (200ms, ..., 1s) passed, less those the burst lets go.
		if r := reserve(1100*ms, 1); r.Lapsed != tc.lapsed {
			t.Errorf("burst %d: a call after a second idle at 10/s: %v lapsed, want %v", tc.burst, r.Lapsed, tc.lapsed)
		}
		if got := p.Stats().Lapsed - before; got != tc.lapsed {
			t.Errorf("burst %d: Stats().Lapsed rose by %v, want %v", tc.burst, got, tc.lapsed)
		}
	}
}
