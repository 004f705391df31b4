package pacer

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"
)

// These tests drive adapt.lua on miniredis in simulated time: every 100ms
// a cluster sends at the schedule's effective rate (less the headroom), a
// simulated provider answers, and the answers are reported as replicas
// report them. The provider is judged by what it accepted.

// provider answers one step's requests: how many it accepted.
type simProvider func(now time.Time, sent int, rng *rand.Rand) (accepted int, retryAfter time.Duration)

// capacity accepts at most perSecond requests in any sliding second, as
// the recording provider and real providers with a per-second limit do,
// answering the rest 429 without Retry-After. A sliding window remembers
// the pace of the second before: a cut shows in full only a second later.
func capacity(perSecond func(time.Duration) float64, t0 time.Time) simProvider {
	var recent []int // accepted per step, the last second's steps
	steps := int(time.Second / simStep)
	return func(now time.Time, sent int, _ *rand.Rand) (int, time.Duration) {
		if len(recent) == steps {
			recent = recent[1:]
		}
		inWindow := 0
		for _, n := range recent {
			inWindow += n
		}
		room := max(int(perSecond(now.Sub(t0)))-inWindow, 0)
		acc := min(sent, room)
		recent = append(recent, acc)
		return acc, 0
	}
}

// randomShare refuses each request with probability share, with a
// Retry-After, whatever the rate.
func randomShare(share float64, ra time.Duration) simProvider {
	return func(_ time.Time, sent int, rng *rand.Rand) (int, time.Duration) {
		acc := 0
		for range sent {
			if rng.Float64() >= share {
				acc++
			}
		}
		if acc < sent {
			return acc, ra
		}
		return acc, 0
	}
}

const simStep = 100 * time.Millisecond

// simSecond is one simulated second's totals.
type simSecond struct {
	sent, accepted int
	rate           float64 // effective rate at its end
	tolerated      float64 // the share tolerated as not about the rate, at its end
}

// simulate runs d of simulated time against prov with `replicas` reporters
// sharing the answers, and returns per-second totals.
func simulate(t *testing.T, cfg Config, replicas int, d time.Duration, prov simProvider) ([]simSecond, *Feedback) {
	t.Helper()
	cfg.Adaptive.Enabled = true
	cfg.Headroom = 0.02 // the default
	p, m := newTimeline(t, cfg)
	ctx := context.Background()
	fbs := make([]*Feedback, replicas)
	for i := range fbs {
		fbs[i] = p.Feedback(slog.New(slog.DiscardHandler))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var out []simSecond
	var cur simSecond
	credit := 0.0
	for i := 0; time.Duration(i)*simStep < d; i++ {
		now := t0.Add(time.Duration(i) * simStep)
		m.SetTime(now)
		st, err := p.Controls().State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sent := 0
		if !now.Before(st.ThrottledUntil) {
			credit += st.EffectiveRate * (1 - p.cfg.Headroom) * simStep.Seconds()
			sent = int(credit)
			credit -= float64(sent)
		}
		acc, ra := prov(now, sent, rng)
		for k := range sent {
			fbs[k%replicas].Observe(Answer{Throttled: k >= acc, RetryAfter: ra})
		}
		for _, fb := range fbs {
			if _, err := fb.Report(ctx); err != nil {
				t.Fatal(err)
			}
		}
		cur.sent += sent
		cur.accepted += acc
		if (i+1)%10 == 0 {
			cur.rate = st.EffectiveRate
			cur.tolerated = fbs[0].State().Tolerated
			out = append(out, cur)
			cur = simSecond{}
		}
	}
	return out, fbs[0]
}

func sums(s []simSecond) (sent, accepted int) {
	for _, x := range s {
		sent += x.sent
		accepted += x.accepted
	}
	return
}

// A provider whose capacity is 300/s under a ceiling of 400: within 10s
// the cluster delivers at least 95% of 300/s with at most 2% throttled,
// and stays there; when the capacity returns to 400, the rate is back at
// 95% of it within 30s.
func TestAdaptiveFollowsCapacity(t *testing.T) {
	capOf := func(at time.Duration) float64 {
		if at < 70*time.Second {
			return 300
		}
		return 400
	}
	secs, fb := simulate(t, Config{Name: "sms", Rate: 400}, 3, 110*time.Second, capacity(capOf, t0))
	sent, acc := sums(secs[10:70])
	share := 1 - float64(acc)/float64(sent)
	t.Logf("capacity 300: %.1f/s delivered, %.2f%% throttled (seconds 10-70)", float64(acc)/60, share*100)
	if got := float64(acc) / 60; got < 0.95*300 {
		t.Errorf("delivered %.1f/s, want at least %.1f", got, 0.95*300)
	}
	if share > 0.02 {
		t.Errorf("throttled share %.2f%%, want at most 2%%", share*100)
	}
	back := -1
	for i := 70; i < len(secs); i++ {
		if secs[i].rate >= 0.95*400 {
			back = i - 70
			break
		}
	}
	t.Logf("capacity back at 400: effective rate ≥ 380 after %ds", back)
	if back < 0 || back > 30 {
		t.Errorf("rate back at 95%% of 400 after %ds, want within 30s (rates %v)", back, rateList(secs[70:]))
	}
	if st := fb.State(); st.Cuts == 0 {
		t.Errorf("no cut recorded: %+v", st)
	}
	// The throttling always followed the rate: nothing is tolerated as
	// a share the provider refuses whatever the rate. (Clean windows used
	// to raise the tolerated share toward what they saw, and with it the
	// bar for the next cut, so the rate crept up to where the provider
	// refused 2% and more: e2e TestAdaptiveFindsCapacity saw 2.2%.)
	for i, x := range secs[:70] {
		if x.tolerated != 0 {
			t.Errorf("second %d at capacity 300: tolerated share %.4f, want 0", i, x.tolerated)
			break
		}
	}
}

// The window right after a cut still carries the old pace at a provider
// that counts over a sliding window; judged, it made a cut that helped look
// useless, and the cut was undone with the share tolerated (at capacity
// 300 under a ceiling of 400, 3.4% of answers stayed 429). It is not
// judged: the cut stays, nothing is tolerated.
func TestAdaptiveCutNotJudgedOnCarryOver(t *testing.T) {
	p, m := newTimeline(t, Config{Name: "sms", Rate: 400, Adaptive: Adaptive{Enabled: true}})
	fb := p.Feedback(slog.New(slog.DiscardHandler))
	ctx := context.Background()
	second := func(from time.Duration, ok, thr int) {
		t.Helper()
		for i := range 10 {
			m.SetTime(t0.Add(from + time.Duration(i)*simStep))
			for range ok / 10 {
				fb.Observe(Answer{})
			}
			for range thr / 10 {
				fb.Observe(Answer{Throttled: true})
			}
			if _, err := fb.Report(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	second(0, 300, 100)          // 25% throttled at 400/s
	second(time.Second, 220, 80) // the provider's window still holds the old pace
	second(2*time.Second, 300, 0)
	second(3*time.Second, 300, 0)
	m.SetTime(t0.Add(4 * time.Second))
	if st, err := fb.Report(ctx); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("after the carry-over: %+v", st)
		if st.Cuts != 1 || st.Tolerated != 0 || st.Rate > 320 {
			t.Errorf("cuts %d, tolerated %.3f, effective rate %.1f: want one cut kept (rate about 300), nothing tolerated",
				st.Cuts, st.Tolerated, st.Rate)
		}
	}
}

// 5% of requests refused with Retry-After: 2s whatever the rate: the
// cluster holds once, learns that the share does not follow the rate and
// stays near the ceiling.
func TestAdaptiveToleratesRandomShare(t *testing.T) {
	secs, fb := simulate(t, Config{Name: "sms", Rate: 400}, 3, 60*time.Second, randomShare(0.05, 2*time.Second))
	_, acc := sums(secs)
	got := float64(acc) / float64(len(secs))
	st := fb.State()
	t.Logf("5%% random 429: %.1f/s delivered (%.2f of the cap), holds %d, cuts %d, tolerated %.3f",
		got, got/400, st.Holds, st.Cuts, st.Tolerated)
	if got < 0.8*400 {
		t.Errorf("delivered %.1f/s, want at least %.0f (rates %v)", got, 0.8*400, rateList(secs))
	}
	if st.Holds != 1 {
		t.Errorf("holds = %d, want 1 (once per episode)", st.Holds)
	}
}

// A hold is honoured once per episode, capped by MaxHold; a later episode,
// after the rate is back at the ceiling and a window is clean, holds again.
func TestAdaptiveHoldOncePerEpisode(t *testing.T) {
	p, m := newTimeline(t, Config{Name: "sms", Rate: 100, Adaptive: Adaptive{Enabled: true, MaxHold: 5 * time.Second}})
	fb := p.Feedback(slog.New(slog.DiscardHandler))
	ctx := context.Background()
	report := func(at time.Duration, ok, thr int, ra time.Duration) Adaptation {
		t.Helper()
		m.SetTime(t0.Add(at))
		for range ok {
			fb.Observe(Answer{})
		}
		for range thr {
			fb.Observe(Answer{Throttled: true, RetryAfter: ra})
		}
		st, err := fb.Report(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := report(0, 10, 1, time.Minute)
	if st.Holds != 1 || !st.HeldUntil.Equal(t0.Add(5*time.Second)) || !st.Episode {
		t.Fatalf("first throttle: holds %d until %v (episode %v), want 1 until t0+5s (MaxHold)", st.Holds, st.HeldUntil, st.Episode)
	}
	if st := report(100*time.Millisecond, 0, 5, time.Minute); st.Holds != 1 {
		t.Fatalf("second throttle in the episode: holds %d, want still 1", st.Holds)
	}
	// The schedule grants nothing before the hold ends.
	if r, err := p.Reserve(ctx, 1); err != nil || r.Granted != 0 && r.Slot(0).Before(t0.Add(5*time.Second)) {
		t.Fatalf("reserve during the hold: %+v, %v", r, err)
	}
	// Clean windows after the hold close the episode (the rate was never cut).
	report(6*time.Second, 50, 0, 0)
	st = report(7100*time.Millisecond, 50, 0, 0)
	if st.Episode {
		t.Fatalf("episode still open after a clean window at the ceiling: %+v", st)
	}
	if st := report(8*time.Second, 10, 1, 2*time.Second); st.Holds != 2 {
		t.Fatalf("a new episode: holds %d, want 2", st.Holds)
	}
}

// Off, nothing of the effective rate reaches the schedule.
func TestAdaptiveOffIgnoresEffectiveRate(t *testing.T) {
	p, m := newTimeline(t, Config{Name: "sms", Rate: 100})
	ctx := context.Background()
	m.HSet(p.key, "eff_rate", "10", "a_episode", "1")
	m.SetTime(t0.Add(time.Second))
	r, err := p.Reserve(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rate != 100 {
		t.Errorf("rate with adaptive off = %v, want 100", r.Rate)
	}
	on, m2 := newTimeline(t, Config{Name: "sms", Rate: 100, Adaptive: Adaptive{Enabled: true}})
	m2.HSet(on.key, "eff_rate", "10", "a_episode", "1")
	m2.SetTime(t0.Add(time.Second))
	if r, err := on.Reserve(ctx, 1); err != nil || r.Rate != 10 {
		t.Errorf("rate with adaptive on in an episode = %v (%v), want 10", r.Rate, err)
	}
}

func rateList(s []simSecond) []int {
	out := make([]int, len(s))
	for i, x := range s {
		out[i] = int(x.rate)
	}
	return out
}
