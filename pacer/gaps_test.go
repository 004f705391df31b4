package pacer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testredis"
)

// offsets are a reservation's slots as offsets from t0.
func offsets(r Reservation) []time.Duration {
	out := make([]time.Duration, r.Granted)
	for i := range out {
		out[i] = r.Slot(i).Sub(t0)
	}
	return out
}

func reserveAt(t *testing.T, p *Pacer, m *redisTime, at time.Duration, n int, stride time.Duration, from time.Time) Reservation {
	t.Helper()
	m.SetTime(t0.Add(at))
	r, err := p.reserve(context.Background(), n, stride, from)
	if err != nil {
		t.Fatalf("reserve at %s: %v", at, err)
	}
	return r
}

// A grant with a stride takes slots a stride apart; the grid points it
// passes over are the next calls' first slots, whatever they ask, before
// any point after tat.
func TestStrideGrantLeavesGapsForOthers(t *testing.T) {
	cfg := Config{Rate: 1000, Horizon: 20 * ms}
	a, m := newTimeline(t, cfg)
	b := sharer(t, m, cfg)

	r := reserveAt(t, a, m, 0, 5, 4*ms, time.Time{})
	if got, want := offsets(r), []time.Duration{0, 4 * ms, 8 * ms, 12 * ms, 16 * ms}; !slices.Equal(got, want) {
		t.Fatalf("stride grant: %v, want %v", got, want)
	}
	r = reserveAt(t, b, m, 0, 3, 0, time.Time{})
	if got, want := offsets(r), []time.Duration{1 * ms, 2 * ms, 3 * ms}; !slices.Equal(got, want) || r.Stamps != nil {
		t.Fatalf("next call: %v (stamps %v), want the first gaps %v, one interval apart", got, r.Stamps, want)
	}
	r = reserveAt(t, b, m, 0, 20, 0, time.Time{})
	want := []time.Duration{5 * ms, 6 * ms, 7 * ms, 9 * ms, 10 * ms, 11 * ms, 13 * ms, 14 * ms, 15 * ms, 17 * ms, 18 * ms, 19 * ms, 20 * ms}
	if got := offsets(r); !slices.Equal(got, want) {
		t.Fatalf("the rest to the horizon: %v, want %v", got, want)
	}
	if r = reserveAt(t, b, m, 0, 1, 0, time.Time{}); r.Granted != 0 || r.RetryAfter != ms {
		t.Fatalf("full to the horizon: granted %d, retry %s; want 0, 1ms", r.Granted, r.RetryAfter)
	}
	// A tops up from a stride past its latest slot: 21 (20 is taken) and
	// 25, leaving 22–24 to the others.
	r = reserveAt(t, a, m, 5*ms, 5, 4*ms, t0.Add(20*ms))
	if got, want := offsets(r), []time.Duration{21 * ms, 25 * ms}; !slices.Equal(got, want) {
		t.Fatalf("top-up: %v, want %v", got, want)
	}
	r = reserveAt(t, b, m, 5*ms, 5, 0, time.Time{})
	if got, want := offsets(r), []time.Duration{22 * ms, 23 * ms, 24 * ms}; !slices.Equal(got, want) {
		t.Fatalf("after the top-up: %v, want %v", got, want)
	}
	// Gaps behind now are gone: at 30ms the schedule is idle again.
	r = reserveAt(t, b, m, 30*ms, 2, 0, time.Time{})
	if got, want := offsets(r), []time.Duration{30 * ms, 31 * ms}; !slices.Equal(got, want) {
		t.Fatalf("idle again: %v, want %v", got, want)
	}
}

// Gaps hold only while tat is where the last call that kept them left it
// and the rate is the same: a throttle (or any hold) and a rate change drop
// them, so that no slot is granted inside a hold or on the old rate's grid.
func TestGapsDroppedWhenTatOrRateMoves(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Rate: 1000, Horizon: 20 * ms}
	a, m := newTimeline(t, cfg)
	b := sharer(t, m, cfg)

	reserveAt(t, a, m, 0, 5, 4*ms, time.Time{}) // 0, 4, …, 16; gaps 1–3, 5–7, …
	if _, err := b.Throttle(ctx, 10*ms); err != nil {
		t.Fatal(err)
	}
	r := reserveAt(t, b, m, 0, 3, 0, time.Time{})
	if got, want := offsets(r), []time.Duration{17 * ms, 18 * ms, 19 * ms}; !slices.Equal(got, want) {
		t.Fatalf("after a throttle: %v, want %v (no gap of the held span)", got, want)
	}

	reserveAt(t, a, m, 40*ms, 3, 4*ms, time.Time{}) // 40, 44, 48; gaps 41–43, 45–47
	if err := b.Controls().SetRate(ctx, 500); err != nil {
		t.Fatal(err)
	}
	r = reserveAt(t, b, m, 40*ms, 2, 0, time.Time{})
	if got, want := offsets(r), []time.Duration{49 * ms, 51 * ms}; !slices.Equal(got, want) {
		t.Fatalf("after a rate change: %v, want %v (the new grid from tat, no old gap)", got, want)
	}
}

// A failover that loses a call which granted only gaps leaves tat where it
// was, so the hint cannot see it; the caller's seq can: its next call
// restarts the schedule one horizon after now, clear of the gaps it holds.
// Without the seq (a caller that never saw the lost call) the same call is
// granted those gaps again. When tat is already a horizon ahead, the
// detecting call changes nothing of it and is refused; the gaps must be
// dropped all the same, or the next caller gets them.
func TestRollbackOfGapGrantsDetectedBySeq(t *testing.T) {
	cfg := Config{Rate: 1000, Horizon: 20 * ms}
	for _, withSeq := range []bool{true, false} {
		a, m := newTimeline(t, cfg)
		b := sharer(t, m, cfg)
		reserveAt(t, a, m, 0, 5, 4*ms, time.Time{}) // gaps 1–3, 5–7, …
		snap := snapshot(t, m)
		lost := reserveAt(t, b, m, 0, 3, 0, time.Time{}) // 1, 2, 3: lost below
		restore(t, m, snap)
		if !withSeq {
			b.mu.Lock()
			b.seq = 0
			b.mu.Unlock()
		}
		r := reserveAt(t, b, m, 1*ms, 3, 0, time.Time{})
		overlap := slices.ContainsFunc(offsets(r), func(d time.Duration) bool { return slices.Contains(offsets(lost), d) })
		if withSeq && (overlap || r.Slot(0).Before(t0.Add(21*ms))) {
			t.Errorf("with seq: %v after losing %v; want a restart one horizon after now (21ms)", offsets(r), offsets(lost))
		}
		if !withSeq && !overlap {
			t.Errorf("without seq: %v after losing %v; want the lost gaps again (else this test shows nothing)", offsets(r), offsets(lost))
		}
	}

	// tat a horizon ahead (0, 4, …, 20: tat at 21ms, the horizon's end).
	a, m := newTimeline(t, cfg)
	b := sharer(t, m, cfg)
	reserveAt(t, a, m, 0, 6, 4*ms, time.Time{})
	snap := snapshot(t, m)
	lost := reserveAt(t, b, m, 0, 3, 0, time.Time{}) // 1, 2, 3: lost below
	restore(t, m, snap)
	if r := reserveAt(t, b, m, 0, 3, 0, time.Time{}); r.Granted != 0 {
		t.Fatalf("detecting call: granted %v, want none (full to the horizon)", offsets(r))
	}
	r := reserveAt(t, a, m, 500*time.Microsecond, 3, 0, time.Time{})
	if slices.ContainsFunc(offsets(r), func(d time.Duration) bool { return slices.Contains(offsets(lost), d) }) {
		t.Errorf("after a refused detecting call, another replica was granted %v; %v were lost and are held", offsets(r), offsets(lost))
	}
}

type stateSnap struct {
	hash map[string]string
	gaps []redis.Z
}

func snapshot(t *testing.T, m *redisTime) stateSnap {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	h, err := rdb.HGetAll(ctx, key("timeline")).Result()
	if err != nil {
		t.Fatal(err)
	}
	g, err := rdb.ZRangeWithScores(ctx, gapsKey("timeline"), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return stateSnap{hash: h, gaps: g}
}

func restore(t *testing.T, m *redisTime, s stateSnap) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Del(ctx, key("timeline"), gapsKey("timeline")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, key("timeline"), s.hash).Err(); err != nil {
		t.Fatal(err)
	}
	if len(s.gaps) > 0 {
		if err := rdb.ZAdd(ctx, gapsKey("timeline"), s.gaps...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Four replicas asking at random moments, for random counts, with and
// without strides and from their latest slots, between throttles: no
// moment is granted twice, no two slots are closer than one interval, and
// no slot granted after a throttle falls inside it.
func TestGapsNeverGrantAMomentTwice(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Rate: 1000, Horizon: 20 * ms}
	first, m := newTimeline(t, cfg)
	ps := []*Pacer{first, sharer(t, m, cfg), sharer(t, m, cfg), sharer(t, m, cfg)}
	latest := make([]time.Time, len(ps))
	rng := rand.New(rand.NewPCG(1, 2))
	strides := []time.Duration{0, 0, 2 * ms, 3 * ms, 5 * ms, 1500 * time.Microsecond}
	var all []time.Time
	var at time.Duration
	var held time.Time // the latest throttle's end
	gapped := 0
	for range 3000 {
		at += time.Duration(rng.IntN(5000)) * time.Microsecond
		i := rng.IntN(len(ps))
		if rng.IntN(50) == 0 {
			m.SetTime(t0.Add(at))
			until, err := ps[i].Throttle(ctx, time.Duration(1+rng.IntN(10))*ms)
			if err != nil {
				t.Fatal(err)
			}
			held = until
			continue
		}
		stride := strides[rng.IntN(len(strides))]
		var from time.Time
		if stride > 0 && !latest[i].IsZero() && rng.IntN(2) == 0 {
			from = latest[i].Add(stride)
		}
		r := reserveAt(t, ps[i], m, at, 1+rng.IntN(4), stride, from)
		if r.Stamps != nil {
			gapped++
		}
		for k := range r.Granted {
			s := r.First.Add(time.Duration(k) * r.Interval) // Slot(k) clamps to now; the stamps are not
			if r.Stamps != nil {
				s = r.Stamps[k]
			}
			if s.Before(held) {
				t.Fatalf("slot at t0+%s granted inside a throttle to t0+%s", s.Sub(t0), held.Sub(t0))
			}
			all = append(all, s)
			latest[i] = later(latest[i], s)
		}
	}
	if gapped < 100 {
		t.Fatalf("only %d grants were spread: the walk was hardly tried", gapped)
	}
	slices.SortFunc(all, time.Time.Compare)
	for k := 1; k < len(all); k++ {
		if d := all[k].Sub(all[k-1]); d < ms-time.Microsecond {
			t.Fatalf("slots at t0+%s and t0+%s, %s apart: closer than one interval (1ms)", all[k-1].Sub(t0), all[k].Sub(t0), d)
		}
	}
	t.Logf("%d slots over %s, %d spread grants", len(all), at, gapped)
}

// Two replicas on a real Redis, each with a job every millisecond under a
// cap of 10,000/s: slots a stride apart serve the claims with a Redis call
// per ten claims or fewer (slots one interval apart serve about two per
// call: the next ones pass their lateness bound before a job comes), and
// a claim mostly finds its slot already due.
func TestStrideServesSteadyDemandWithFewCalls(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	stats := make([]Stats, 2)
	for i := range stats {
		p, err := New(srv.Client(), Config{Name: "steady", Rate: 10000})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for range 1500 {
				<-tick.C
				if _, err := p.Take(ctx, 1); err != nil {
					t.Error(err)
					return
				}
			}
			stats[i] = p.Stats()
		})
	}
	wg.Wait()
	for i, s := range stats {
		perClaim := float64(s.Calls) / float64(s.Used)
		t.Logf("replica %d: %d calls for %d claims (%.3f per claim), %d granted, waited %s in all", i, s.Calls, s.Used, perClaim, s.Granted, s.WaitTime)
		if perClaim > 0.1 {
			t.Errorf("replica %d: %.3f Redis calls per claim, want at most 0.1", i, perClaim)
		}
	}
}

// The schedule of TestStridedReplicaSwitchesWhenSaturated, and the window
// after the backlog came in which it counts claims.
const (
	switchRate = 10000
	switchFrom = 10 * time.Millisecond
	switchTo   = 40 * time.Millisecond
)

// A replica that holds slots a stride apart when a backlog comes does not
// drain them at its old pace: once its claims wait for their slots it tops
// up with slots one interval apart, filling the holes between them, and
// claims nearly as fast as a replica that never held strided slots (with
// the race detector, 225–243 claims in 30ms where a fresh replica made
// 289–292 and the rate allows 294; taking its strided slots one by one
// until they ran out, 34–42 where a fresh replica made 94–176, which fails
// the test in five runs of six).
// The switch must not hang on how promptly a claim wakes for its slot:
// the claim delay that tells a saturated replica counted from the slot,
// so a replica whose timers woke its claims late never looked saturated
// and drained its strided slots at their pace (with every wake 250µs
// late, 32–35 claims against a fresh replica's 261–283; as in CI, where
// it read 34 against 285). It counts from the waking now (247–289).
// How fast a replica can claim is the machine's: the bound is a third of
// what a fresh replica claims in the same window right after (157–251
// against 288–294 with two CPU hogs beside the test), so that a loaded
// machine, on which neither claims near the rate, does not fail it.
// A machine that takes the CPU from the claiming goroutine itself for
// milliseconds between its claims can still keep the switch from
// happening: each such pause raises the claim delay past the schedule's
// 100µs interval and lowers the wait score (the claims after it find
// their slots due), so the replica never looks saturated and drains its
// strided slots at their pace until they run out (at most one horizon),
// then refills as any replica does. CI, on a busy host,
// read 50 against 273 once; with two CPU hogs beside it, 30 against 259
// in one run of 120, the goroutine paused 2–3ms every four claims or so.
// Checking for a backlog ahead of the stride, without the claim delay,
// cured that but raised TestExactSteadyThenBacklog's calls per job in
// its steady phase from 0.17–0.19 to 0.24–0.28 (its fetched jobs come in
// bunches whose claims all wait), so the test gives a replica up to three
// tries, each on a new schedule: a replica that never switches fails all
// three. A try counts only where the fresh replica claimed at least a
// quarter of the rate: one that never switched either (its first claim
// waits a horizon, and the gap makes it stride) read 27 once.
func TestStridedReplicaSwitchesWhenSaturated(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	for _, lag := range []time.Duration{0, 250 * time.Microsecond} {
		t.Run(fmt.Sprintf("waking %s late", lag), func(t *testing.T) {
			var tries []string
			for try := range 3 {
				n, control, err := stridedSwitch(t, srv, lag, try)
				if err != nil {
					t.Fatal(err)
				}
				// A fresh replica that claims less than a quarter of
				// what the schedule's rate allows in the window (75)
				// says nothing.
				if control >= int(switchRate*(switchTo-switchFrom).Seconds()/4) && n >= control/3 {
					return
				}
				tries = append(tries, fmt.Sprintf("%d against %d", n, control))
			}
			t.Errorf("claims in the backlog's window, in three tries: %s; want at least a third of a fresh replica's in one", strings.Join(tries, ", "))
		})
	}
}

// stridedSwitch is one try of TestStridedReplicaSwitchesWhenSaturated for
// a strided replica whose waits end lag late: it returns the replica's
// claims in the backlog's window and a fresh replica's in the same window.
func stridedSwitch(t *testing.T, srv *testredis.Server, lag time.Duration, try int) (int, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := fmt.Sprintf("switch-%d-%d", lag, try)
	p, err := New(srv.Client(), Config{Name: name, Rate: switchRate})
	if err != nil {
		return 0, 0, err
	}
	p.wakeLag = lag
	tick := time.NewTicker(time.Millisecond)
	for range 300 {
		<-tick.C
		if _, err := p.Take(ctx, 1); err != nil {
			return 0, 0, err
		}
	}
	tick.Stop()
	p.mu.Lock()
	strided, held := p.strided, len(p.buf)
	p.mu.Unlock()
	if !strided {
		return 0, 0, fmt.Errorf("after 300 claims a millisecond apart the replica holds %d slots, none granted with a stride", held)
	}
	from, to := switchFrom, switchTo
	n, err := claimsIn(ctx, p, from, to)
	if err != nil {
		return 0, 0, err
	}
	fresh, err := New(srv.Client(), Config{Name: name + "-fresh", Rate: switchRate})
	if err != nil {
		return 0, 0, err
	}
	// Past its first horizon (a new schedule starts one horizon ahead)
	// and its first claims, it claims as fast as this machine lets it.
	if _, err := claimsIn(ctx, fresh, 0, 0); err != nil {
		return 0, 0, err
	}
	control, err := claimsIn(ctx, fresh, from, to)
	if err != nil {
		return 0, 0, err
	}
	t.Logf("try %d: held %d strided slots; %d claims in [%s, %s) of a backlog, a fresh replica %d (the schedule's rate: %.0f)",
		try+1, held, n, from, to, control, switchRate*0.98*(to-from).Seconds())
	return n, control, nil
}

// claimsIn takes slots from p back to back for twice to (at least 100ms),
// and returns how many it took in [from, to) after the first.
func claimsIn(ctx context.Context, p *Pacer, from, to time.Duration) (int, error) {
	start := time.Now()
	n := 0
	for time.Since(start) < max(2*to, 100*time.Millisecond) {
		if _, err := p.Take(ctx, 1); err != nil {
			return 0, err
		}
		if c := time.Since(start); c >= from && c < to {
			n++
		}
	}
	return n, nil
}
