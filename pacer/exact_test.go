package pacer

import (
	"strconv"
	"testing"
	"time"
)

// A schedule whose state is gone (first start, key deleted or evicted,
// Redis restarted empty) starts one horizon after now: replicas may hold
// slots granted up to one horizon ahead, and a restart at now would grant
// those moments again.
func TestScheduleStartsAfterStateLoss(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 100, Horizon: 50 * ms})
	run(t, p, m, []step{
		{at: 0, n: 10, granted: 6, first: 0}, // slots at 0…50ms
	})
	m.Del(key("timeline"))
	run(t, p, m, []step{
		// Deleted at 10ms: the next slot comes no earlier than 10ms+horizon,
		// after every slot granted before the loss.
		{at: 10 * ms, n: 10, granted: 1, first: 60 * ms},
		{at: 30 * ms, n: 10, granted: 2, first: 70 * ms},
	})
}

// A schedule rolled back (a failover to a replica that lagged) never
// restarts behind a slot the calling replica holds; when the caller holds
// a slot an interval or more past the schedule's next free one, the others
// may hold slots up to one horizon ahead too, and the schedule restarts
// after them, as after a loss. A hint further ahead than one horizon means
// the Redis clock went back, and is ignored.
func TestScheduleNeverBehindHeldSlots(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 100, Horizon: 50 * ms})
	run(t, p, m, []step{{at: 0, n: 10, granted: 6, first: 0}})
	setHint := func(at time.Time) {
		p.mu.Lock()
		p.hint = at
		p.mu.Unlock()
	}
	// Rolled back by a second: the caller holds 50ms, the schedule says
	// the next free slot is long past. Restart one horizon after now (20ms).
	m.HSet(key("timeline"), "tat", us(t0.Add(-time.Second)), "last_now", us(t0.Add(-time.Second)))
	setHint(t0.Add(50 * ms))
	run(t, p, m, []step{{at: 20 * ms, n: 10, granted: 1, first: 70 * ms}}) // 70ms only: the horizon's end

	// Rolled back by less than an interval: behind the caller's slot only.
	m.HSet(key("timeline"), "tat", us(t0.Add(155*ms)), "last_now", us(t0.Add(120*ms)))
	setHint(t0.Add(150 * ms))
	run(t, p, m, []step{{at: 120 * ms, n: 10, granted: 2, first: 160 * ms}}) // 160 and 170ms

	setHint(t0.Add(time.Hour))
	m.HSet(key("timeline"), "tat", us(t0.Add(300*ms)), "last_now", us(t0.Add(300*ms)))
	run(t, p, m, []step{{at: 300 * ms, n: 1, granted: 1, first: 300 * ms}})
}

// Headroom runs the schedule a fraction below the rate.
func TestScheduleHeadroom(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 100, Horizon: 50 * ms, Headroom: 0.2})
	run(t, p, m, []step{
		{at: 0, n: 10, granted: 5, first: 0}, // one slot every 12.5ms: 0, 12.5, 25, 37.5, 50
		{at: 20 * ms, n: 10, granted: 1, first: 62500 * time.Microsecond},
	})
	r, err := p.Reserve(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Interval != 12500*time.Microsecond || r.Rate != 100 {
		t.Errorf("interval %s, rate %v; want 12.5ms (80/s) under a cap of 100", r.Interval, r.Rate)
	}
}

// A replica whose replies take long asks for no slot closer than they
// take: on a busy schedule the near slots stay with the others; on an idle
// one it skips to where it can use them.
func TestScheduleLead(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 100, Horizon: 50 * ms})
	run(t, p, m, []step{{at: 0, n: 2, granted: 2, first: 0}}) // tat at 20ms: busy
	setLead(p, 31*ms)                                         // asks for slots ≥ 30ms ahead (lead − lateness/2)
	run(t, p, m, []step{
		{at: 0, n: 1, granted: 0, retry: 10 * ms},         // 20ms is too close: come back
		{at: 200 * ms, n: 1, granted: 1, first: 230 * ms}, // idle: skip to now+30ms
	})
}

// On a schedule far faster than its replicas use it (no cap in reach),
// the moments a slow replica cannot reach hold many points: it skips them
// as on an idle schedule instead of being refused again and again while
// the others draw on it. A few points it still leaves to the others.
func TestScheduleLeadSkipsManyPoints(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 100_000, Horizon: 50 * ms}) // one point every 10µs
	run(t, p, m, []step{{at: 0, n: 2, granted: 2, first: 0}})       // tat at 20µs: busy
	setLead(p, 1500*time.Microsecond)                               // 0.5ms ahead: 48 points to reach, under 64
	run(t, p, m, []step{{at: 0, n: 1, granted: 0, retry: 480 * time.Microsecond}})
	setLead(p, 2*ms) // 1ms ahead: 98 points
	run(t, p, m, []step{
		{at: 0, n: 2, granted: 2, first: ms},                                         // skipped to now+1ms
		{at: 0, n: 1, granted: 1, first: ms + 20*time.Microsecond},                   // on from there: the points skipped are never granted
		{at: 100 * time.Microsecond, n: 1, granted: 0, retry: 70 * time.Microsecond}, // 7 points to reach (tat 1.03ms): left to the others
	})
}

// A replica asks by its longest recent reply, except on a schedule so
// fast that half the lateness bound spans 64 points (no cap in reach),
// where it asks by the typical one, as a ride does: at the uncapped
// ceiling, every batch placed by the longest came after the replica could
// have used it.
func TestLeadByTheScheduleRate(t *testing.T) {
	p, m := newTimeline(t, Config{Rate: 500, Horizon: 50 * ms}) // lateness bound 2ms by default
	run(t, p, m, []step{{at: 0, n: 1, granted: 1, first: 0}})   // the interval, from a grant
	sent := func(iv time.Duration) time.Duration {
		t.Helper()
		p.mu.Lock()
		defer p.mu.Unlock()
		for i := range p.clock.leads {
			p.clock.leads[i] = 1200 * time.Microsecond // what most replies took
		}
		p.clock.leads[3] = 3 * ms // one slow reply
		p.clock.nlead = leadSamples
		p.batch.interval = iv
		_, args := p.reserveArgsLocked(1, 0, time.Time{}, false)
		return time.Duration(args[6].(int64)) * time.Microsecond
	}
	for _, tc := range []struct {
		iv, want time.Duration
	}{
		{2 * ms, 2 * ms},                                  // 500/s: the longest, less half the lateness bound
		{16 * time.Microsecond, 2 * ms},                   // 62,500/s: 62 points in 1ms
		{15625 * time.Nanosecond, 200 * time.Microsecond}, // 64,000/s: 64 points, the typical lead
		{time.Microsecond, 200 * time.Microsecond},        // no cap
	} {
		if got := sent(tc.iv); got != tc.want {
			t.Errorf("interval %v: lead sent %v, want %v", tc.iv, got, tc.want)
		}
	}
}

// TakeAhead hands a slot over at most one interval before it, except on a
// very fast schedule (no cap in reach), where it hands it over as far
// ahead as asked.
func TestAheadByTheScheduleRate(t *testing.T) {
	p, _ := newTimeline(t, Config{Rate: 500, Horizon: 50 * ms}) // lateness bound 2ms by default
	for _, tc := range []struct {
		iv, want time.Duration
	}{
		{4 * ms, 2 * ms}, // 250/s: the whole 2ms, within an interval
		{500 * time.Microsecond, 500 * time.Microsecond}, // 2,000/s: one interval
		{16 * time.Microsecond, 16 * time.Microsecond},   // 62,500/s: one interval
		{15625 * time.Nanosecond, 2 * ms},                // 64,000/s: fast, the whole 2ms
		{time.Microsecond, 2 * ms},                       // no cap
	} {
		p.mu.Lock()
		p.batch.interval = tc.iv
		p.mu.Unlock()
		if got := p.aheadOf(2 * ms); got != tc.want {
			t.Errorf("interval %v: ahead %v, want %v", tc.iv, got, tc.want)
		}
	}
}

func setLead(p *Pacer, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.clock.leads {
		p.clock.leads[i] = d
	}
	p.clock.nlead = leadSamples
	p.clock.n, p.clock.best = 0, -1 // and no sample, so that the next call adds none first
}

func us(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }
