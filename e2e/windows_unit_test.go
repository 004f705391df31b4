package e2e_test

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// ms returns t0 + each offset in milliseconds, sorted as given.
func ms(offsets ...float64) []time.Time {
	out := make([]time.Time, len(offsets))
	for i, o := range offsets {
		out[i] = t0.Add(time.Duration(o * float64(time.Millisecond)))
	}
	return out
}

// evenly returns n times spaced by gap from t0.
func evenly(n int, gap time.Duration) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = t0.Add(time.Duration(i) * gap)
	}
	return out
}

func TestBusiest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		times []time.Time
		w     time.Duration
		want  int
		at    float64 // ms after t0
	}{
		{"none", nil, time.Second, 0, -1},
		{"one", ms(7), time.Second, 1, 7},
		{"closed at both ends", ms(0, 1000), time.Second, 2, 0},
		{"just past the end", ms(0, 1000.001), time.Second, 1, 0},
		{"busiest later", ms(0, 500, 1200, 1300, 1400, 2200), time.Second, 4, 500},
		{"500/s for 3s, closed 1s window", evenly(1500, 2*time.Millisecond), time.Second, 501, 0},
		{"500/s, 100ms", evenly(1500, 2*time.Millisecond), 100 * time.Millisecond, 51, 0},
		{"490/s, 1s", evenly(1500, time.Second/490), time.Second, 491, 0},
		{"same instant", ms(5, 5, 5), time.Millisecond, 3, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, at := busiest(tc.times, tc.w)
			if n != tc.want {
				t.Errorf("busiest %s: got %d, want %d", tc.w, n, tc.want)
			}
			if tc.at >= 0 && !at.Equal(ms(tc.at)[0]) {
				t.Errorf("busiest window starts at %s, want %gms", at.Sub(t0), tc.at)
			}
		})
	}
}

// One extra request once a second above an even 300/s breaks
// the 100ms bound but not the 1s one, and a run 2% fast breaks the 1s one.
func TestBusiestCatchesExcess(t *testing.T) {
	p := promise{rate: 300, burst: 1}
	even := evenly(1500, time.Second/300)
	if n, _ := busiest(even, time.Second); n > p.max1s() {
		t.Fatalf("even 300/s: busiest 1s %d > bound %d", n, p.max1s())
	}
	pairs := append(ms(1000.5, 2000.5), even...)
	sortTimes(pairs)
	if n, _ := busiest(pairs, 100*time.Millisecond); n <= p.max100ms() {
		t.Errorf("two extra in 100ms: busiest %d, want above the bound %d", n, p.max100ms())
	}
	fast := evenly(1500, time.Second/306)
	if n, _ := busiest(fast, time.Second); n <= p.max1s() {
		t.Errorf("306/s: busiest 1s %d, want above the bound %d", n, p.max1s())
	}
}

func sortTimes(ts []time.Time) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Before(ts[j-1]); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

func TestMeanRate(t *testing.T) {
	// 400/s for 5s: the saturated part is [0.5s, 4.4975s).
	run := evenly(2000, time.Second/400)
	if got := meanRate(run); math.Abs(got-400) > 1 {
		t.Errorf("even 400/s: mean %.2f/s, want 400 ± 1", got)
	}
	// A slow ramp (100 jobs in the first 0.4s) and a tail are cut off.
	ramp := append(evenly(100, 4*time.Millisecond), shift(evenly(2000, time.Second/400), 400*time.Millisecond)...)
	if got := meanRate(ramp); math.Abs(got-400) > 2 {
		t.Errorf("ramp then 400/s: mean %.2f/s, want 400 ± 2", got)
	}
	// A 1s gap in the middle, left out as quiet, leaves the mean at 400.
	gap := append(evenly(800, time.Second/400), shift(evenly(1200, time.Second/400), 3*time.Second)...)
	if got := meanRate(gap); got > 340 {
		t.Errorf("1s gap counted: mean %.2f/s, want well under 400", got)
	}
	if got := meanRate(gap, span{t0.Add(2 * time.Second), t0.Add(3 * time.Second)}); math.Abs(got-400) > 2 {
		t.Errorf("1s gap left out: mean %.2f/s, want 400 ± 2", got)
	}
	if got := meanRate(evenly(300, time.Second/400)); got != 0 {
		t.Errorf("0.75s run: mean %.2f/s, want 0 (too short to judge)", got)
	}
	if _, _, ok := saturated(nil); ok {
		t.Error("no arrivals: saturated, want not")
	}
}

func shift(ts []time.Time, d time.Duration) []time.Time {
	for i := range ts {
		ts[i] = ts[i].Add(d)
	}
	return ts
}

func TestWithin(t *testing.T) {
	ts := ms(0, 10, 20, 30, 40)
	for _, tc := range []struct {
		from, to time.Time
		want     int
	}{
		{ms(10)[0], ms(30)[0], 2}, // [10, 30): 10, 20
		{ms(10)[0], ms(30.001)[0], 3},
		{time.Time{}, ms(20)[0], 2},
		{ms(25)[0], time.Time{}, 2},
		{ms(50)[0], ms(60)[0], 0},
		{ms(30)[0], ms(10)[0], 0},
	} {
		if got := len(within(ts, tc.from, tc.to)); got != tc.want {
			t.Errorf("within(%s, %s): %d, want %d", tc.from.Sub(t0), tc.to.Sub(t0), got, tc.want)
		}
	}
}

func TestPromiseOf(t *testing.T) {
	for _, tc := range []struct {
		env      []string
		headroom float64
		max1s    int
		max100ms int
	}{
		{nil, 0.02, 501, 51},
		{[]string{"SLUICE_PACER_HEADROOM=-1"}, 0, 501, 51},
		{[]string{"SLUICE_PACER_HEADROOM=0.03", "SLUICE_PACER_BURST=5"}, 0.03, 505, 55},
		{[]string{"SLUICE_PACER_MAX_LATENESS=5ms"}, 0.05, 501, 51},
		{[]string{"SLUICE_PACER_HEADROOM=0.03", "SLUICE_PACER_HEADROOM=0.01"}, 0.01, 501, 51},
	} {
		p := promiseOf(t, 500, tc.env)
		if math.Abs(p.headroom-tc.headroom) > 1e-9 || p.max1s() != tc.max1s || p.max100ms() != tc.max100ms {
			t.Errorf("%v: headroom %v, bounds %d/%d; want %v, %d/%d", tc.env, p.headroom, p.max1s(), p.max100ms(), tc.headroom, tc.max1s, tc.max100ms)
		}
	}
}

const lateness = `# HELP sluice_send_lateness_seconds How late requests left after their slot.
# TYPE sluice_send_lateness_seconds histogram
sluice_send_lateness_seconds_bucket{le="0.0001"} 50
sluice_send_lateness_seconds_bucket{le="0.0005"} 90
sluice_send_lateness_seconds_bucket{le="0.001"} 99
sluice_send_lateness_seconds_bucket{le="0.002"} 100
sluice_send_lateness_seconds_bucket{le="0.005"} 100
sluice_send_lateness_seconds_bucket{le="+Inf"} 100
sluice_send_lateness_seconds_sum 0.01
sluice_send_lateness_seconds_count 100
sluice_pacer_slots_forfeited_total{reason="late"} 2
sluice_pacer_slots_forfeited_total{reason="unclaimed"} 7
`

func TestScrape(t *testing.T) {
	var m metricSet
	for range 2 { // two replicas alike
		if err := m.parseMetrics(strings.NewReader(lateness)); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.lateness.total(); got != 200 {
		t.Errorf("observations %v, want 200", got)
	}
	for _, tc := range []struct{ q, want float64 }{{0.5, 0.0001}, {0.7, 0.0003}, {0.99, 0.001}, {1, 0.002}} {
		if got, _ := m.lateness.quantile(tc.q); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("quantile %v: %v, want %v", tc.q, got, tc.want)
		}
	}
	if hi, _ := m.lateness.highest(); hi != 0.002 {
		t.Errorf("highest bucket %v, want 0.002", hi)
	}
	if m.forfeited["late"] != 4 || m.forfeited["unclaimed"] != 14 || m.forfeited["stale"] != 0 {
		t.Errorf("forfeits %v, want late 4, unclaimed 14", m.forfeited)
	}
	want := "100µs / 1ms / ≤2ms"
	if got := m.latenessText(); got != want {
		t.Errorf("lateness %q, want %q", got, want)
	}
	var none metricSet
	if err := none.parseMetrics(strings.NewReader("sluice_jobs_total 3\n")); err != nil {
		t.Fatal(err)
	}
	if none.latenessText() != "n/a" || none.forfeitText() != "n/a" {
		t.Errorf("absent metrics: %q, %q; want n/a", none.latenessText(), none.forfeitText())
	}
}
