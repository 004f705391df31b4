package e2e_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// stallMin is the shortest pause of the test process that stallMeter
// records: longer than the scheduling delays a loaded 2-core host gives a
// runnable goroutine now and then, far shorter than the stalls of a
// virtual machine whose host runs another (tens of milliseconds), during
// which nothing on the machine runs and nothing can arrive.
const stallMin = 5 * time.Millisecond

// stallMeter records the spans in which the test process did not run for
// longer than stallMin: a goroutine wakes every millisecond and notes each
// wake that came later. checkExact leaves those spans out of the mean,
// their arrivals with their time, so that a stall of the whole machine
// does not count as a slow schedule, while a pause of the test process
// alone (the dispatchers are other processes and go on sending) changes
// nothing: its arrivals go with its time. The window bounds count every
// arrival, stalls or not.
type stallMeter struct {
	mu    sync.Mutex
	spans []span
}

// startStallMeter starts a meter that runs until t's cleanup.
func startStallMeter(t testing.TB) *stallMeter {
	m := &stallMeter{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.run(ctx, time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

// run wakes every tick until ctx ends, recording the time past the tick
// of each wake more than stallMin after the previous one.
func (m *stallMeter) run(ctx context.Context, tick time.Duration) {
	tk := time.NewTicker(tick)
	defer tk.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		now := time.Now()
		if s, ok := stallOf(last, now, tick); ok {
			m.mu.Lock()
			m.spans = append(m.spans, s)
			m.mu.Unlock()
		}
		last = now
	}
}

// stallOf returns the stall between a wake at last and the next at now,
// with wakes due every tick: from one tick after last to now, when now
// came more than stallMin after last.
func stallOf(last, now time.Time, tick time.Duration) (span, bool) {
	if now.Sub(last) <= stallMin {
		return span{}, false
	}
	return span{from: last.Add(tick), to: now}, true
}

// stalls returns the spans recorded so far, oldest first.
func (m *stallMeter) stalls() []span {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.spans)
}

// merged returns spans sorted and with overlapping ones joined (meanSpan
// wants spans that do not overlap), and their total length.
func merged(spans []span) ([]span, time.Duration) {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && !s.from.After(out[n-1].to) {
			out[n-1].to = later(out[n-1].to, s.to)
			continue
		}
		out = append(out, s)
	}
	var total time.Duration
	for _, s := range out {
		total += s.to.Sub(s.from)
	}
	return out, total
}

// TestMerged: overlapping and touching spans join; the total is the
// union's length.
func TestMerged(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	got, total := merged([]span{{at(50), at(60)}, {at(0), at(10)}, {at(5), at(20)}, {at(20), at(30)}, {at(55), at(58)}})
	want := []span{{at(0), at(30)}, {at(50), at(60)}}
	if !slices.Equal(got, want) || total != 40*time.Millisecond {
		t.Errorf("merged: got %v (total %s), want %v (total 40ms)", got, total, want)
	}
}

// TestStallOf: a wake more than stallMin after the last is a stall from
// one tick after the last wake to this one; a wake on time is none.
func TestStallOf(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	for _, tc := range []struct {
		gap  time.Duration
		want time.Duration // the stall's length; 0: none
	}{
		{ms(1), 0}, {ms(3), 0}, {stallMin, 0}, {ms(5.5), ms(4.5)}, {ms(40), ms(39)},
	} {
		s, ok := stallOf(t0, t0.Add(tc.gap), time.Millisecond)
		switch {
		case ok != (tc.want > 0):
			t.Errorf("gap %s: stall %v, want %v", tc.gap, ok, tc.want > 0)
		case ok && (s.from != t0.Add(time.Millisecond) || s.to.Sub(s.from) != tc.want):
			t.Errorf("gap %s: stall %s from %s after the last wake, want %s from 1ms", tc.gap, s.to.Sub(s.from), s.from.Sub(t0), tc.want)
		}
	}
}

// quietRate is how many of times fall in [from, to) outside the stalls, per
// second of that window outside them, and the stalled time within it: a
// rate judged over the time the test process ran, as checkExact judges the
// mean. A stall of the whole machine, when nothing can arrive, then no
// longer reads as a slow cluster.
func quietRate(times []time.Time, stalls []span, from, to time.Time) (float64, time.Duration) {
	spans, _ := merged(stalls)
	var clipped []span
	var stalled time.Duration
	for _, s := range spans {
		c := span{from: later(s.from, from), to: earlier(s.to, to)}
		if c.to.After(c.from) {
			clipped = append(clipped, c)
			stalled += c.to.Sub(c.from)
		}
	}
	n := 0
	for _, at := range times {
		if at.Before(from) || !at.Before(to) {
			continue
		}
		if !slices.ContainsFunc(clipped, func(s span) bool { return !at.Before(s.from) && at.Before(s.to) }) {
			n++
		}
	}
	quiet := to.Sub(from) - stalled
	if quiet <= 0 {
		return 0, stalled
	}
	return float64(n) / quiet.Seconds(), stalled
}

func TestQuietRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var times []time.Time
	for ms := 0; ms < 1000; ms += 10 { // 100/s over [0, 1s)
		times = append(times, at(ms))
	}
	// No arrivals during a stall of 200ms: the rate over the rest is 100/s.
	gapped := slices.DeleteFunc(slices.Clone(times), func(x time.Time) bool { return !x.Before(at(400)) && x.Before(at(600)) })
	stalls := []span{{at(400), at(600)}, {at(1200), at(1300)}} // the second outside the window
	rate, stalled := quietRate(gapped, stalls, at(0), at(1000))
	if rate != 100 || stalled != 200*time.Millisecond {
		t.Errorf("quietRate with a 200ms stall: %.1f/s, %s stalled; want 100/s, 200ms", rate, stalled)
	}
	// Without the stall, the gap reads as 80/s.
	if rate, _ := quietRate(gapped, nil, at(0), at(1000)); rate != 80 {
		t.Errorf("quietRate without stalls: %.1f/s, want 80/s", rate)
	}
	// Arrivals inside a stall leave with its time.
	if rate, _ := quietRate(times, stalls, at(0), at(1000)); rate != 100 {
		t.Errorf("quietRate with arrivals in the stall: %.1f/s, want 100/s", rate)
	}
}
