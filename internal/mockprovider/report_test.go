package mockprovider_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

const ms = time.Millisecond

// at returns times at the given offsets from t0.
func at(offsets ...time.Duration) []time.Time {
	out := make([]time.Time, len(offsets))
	for i, o := range offsets {
		out[i] = t0.Add(o)
	}
	return out
}

// spaced returns n offsets 0, gap, 2*gap...
func spaced(n int, gap time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i) * gap
	}
	return out
}

func TestMaxInWindowHalfOpen(t *testing.T) {
	tests := []struct {
		name  string
		times []time.Time
		w     time.Duration
		want  int
	}{
		{"none", nil, 100 * ms, 0},
		{"one", at(0), 100 * ms, 1},
		{"10 spaced 10ms fit in 100ms", at(spaced(10, 10*ms)...), 100 * ms, 10},
		{"11 spaced 10ms: the 11th is at t+100ms, outside [t, t+100ms)", at(spaced(11, 10*ms)...), 100 * ms, 10},
		{"11 spaced 10ms in 101ms", at(spaced(11, 10*ms)...), 101 * ms, 11},
		{"two 100ms apart", at(0, 100*ms), 100 * ms, 1},
		{"two 99.999999ms apart", at(0, 100*ms-1), 100 * ms, 2},
		{"same instant", at(5*ms, 5*ms, 5*ms), time.Nanosecond, 3},
		{"burst later in the run", at(0, 300*ms, 600*ms, 900*ms, 901*ms, 902*ms, 903*ms, 1200*ms), 100 * ms, 4},
		{"400 spaced 2.5ms in 1s", at(spaced(400, 2500*time.Microsecond)...), time.Second, 400},
		{"401 spaced 2.5ms in 1s", at(spaced(401, 2500*time.Microsecond)...), time.Second, 400},
		{"window across a burst edge", at(0, 950*ms, 960*ms, 1050*ms, 1940*ms), time.Second, 4},
	}
	for _, tt := range tests {
		if got := mockprovider.MaxInWindow(tt.times, tt.w); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestPercentileNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * ms
	}
	tests := []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 50, 0},
		{[]time.Duration{7 * ms}, 50, 7 * ms},
		{[]time.Duration{7 * ms}, 99, 7 * ms},
		{[]time.Duration{1 * ms, 2 * ms, 3 * ms}, 50, 2 * ms},
		{[]time.Duration{1 * ms, 2 * ms, 3 * ms}, 99, 3 * ms},
		{[]time.Duration{1 * ms, 2 * ms, 3 * ms, 4 * ms}, 50, 2 * ms},
		{hundred, 50, 50 * ms},
		{hundred, 99, 99 * ms},
		{hundred, 100, 100 * ms},
		{hundred, 1, 1 * ms},
	}
	for _, tt := range tests {
		if got := mockprovider.Percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("p%v of %d values: got %v, want %v", tt.p, len(tt.sorted), got, tt.want)
		}
	}
}

// synthetic is ten arrivals spaced 10ms, given out of order: four in lane
// vip enqueued 5ms before arriving, six in default enqueued 50ms before
// t0; job "x" delivered three times, "y" throttled then delivered, two
// delivered with only an idempotency key "k", one with no id at all.
func synthetic() []mockprovider.Arrival {
	a := func(off time.Duration, lane, id, key string, status int) mockprovider.Arrival {
		enq := t0.Add(-50 * ms)
		if lane == "vip" {
			enq = t0.Add(off - 5*ms)
		}
		return mockprovider.Arrival{At: t0.Add(off), Lane: lane, JobID: id, Key: key, Status: status, EnqueuedAt: enq}
	}
	return []mockprovider.Arrival{
		a(90*ms, "default", "", "", 200),
		a(0, "vip", "x", "kx", 200),
		a(10*ms, "vip", "x", "kx", 200),
		a(20*ms, "vip", "y", "ky", 429),
		a(30*ms, "vip", "y", "ky", 200),
		a(40*ms, "default", "x", "kx", 200),
		a(50*ms, "default", "", "k", 200),
		a(60*ms, "default", "", "k", 200),
		a(70*ms, "default", "z", "", 500),
		a(80*ms, "default", "w", "", 400),
	}
}

func TestSummarize(t *testing.T) {
	r := mockprovider.Summarize(synthetic(), 100)
	checks := []struct {
		what      string
		got, want any
	}{
		{"count", r.Count, 10},
		{"delivered", r.Delivered, 7},
		{"statuses", r.Statuses, map[int]int{200: 7, 429: 1, 500: 1, 400: 1}},
		{"first", r.First, t0},
		{"last", r.Last, t0.Add(90 * ms)},
		{"span", r.Span, 90 * ms},
		{"duplicates (x twice more, k once more)", r.Duplicates, 3},
		{"duplicate jobs", r.DuplicateJobs, 2},
		{"max in 100ms", r.Max100ms, 10},
		{"max in 1s", r.Max1s, 10},
		{"inter-arrival p50", r.InterArrivalP50, 10 * ms},
		{"inter-arrival p99", r.InterArrivalP99, 10 * ms},
		{"cap", r.Cap, 100.0},
	}
	for _, c := range checks {
		if !equal(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
	// Nine 10ms intervals: 100 requests/s, 70 of them delivered.
	for _, f := range []struct {
		what      string
		got, want float64
	}{{"mean rate", r.MeanRate, 100}, {"delivered rate", r.DeliveredRate, 70}, {"mean/cap", r.MeanOverCap, 1}} {
		if math.Abs(f.got-f.want) > 1e-9 {
			t.Errorf("%s: got %v, want %v", f.what, f.got, f.want)
		}
	}
	want := []mockprovider.LaneReport{
		// default arrives at 40..90ms, enqueued at -50ms: 90..140ms.
		{Lane: "default", Count: 6, Delivered: 4, LatencyCount: 6, LatencyP50: 110 * ms, LatencyP99: 140 * ms, LatencyMax: 140 * ms},
		{Lane: "vip", Count: 4, Delivered: 3, LatencyCount: 4, LatencyP50: 5 * ms, LatencyP99: 5 * ms, LatencyMax: 5 * ms},
	}
	if !slices.Equal(r.Lanes, want) {
		t.Errorf("lanes:\n got %+v\nwant %+v", r.Lanes, want)
	}
}

func TestSummarizeEdges(t *testing.T) {
	r := mockprovider.Summarize(nil, 0)
	if r.Count != 0 || r.MeanRate != 0 || r.Max1s != 0 || r.Lanes == nil || !r.First.IsZero() {
		t.Errorf("no arrivals: got %+v", r)
	}
	one := []mockprovider.Arrival{{At: t0, Status: 200}}
	r = mockprovider.Summarize(one, 50)
	if r.Count != 1 || r.MeanRate != 0 || r.MeanOverCap != 0 || r.Max100ms != 1 || r.Lanes[0].LatencyCount != 0 {
		t.Errorf("one arrival without enqueued-at: got %+v", r)
	}
	if !strings.Contains(r.String(), "(none)") {
		t.Errorf("text of a lane-less arrival does not say (none):\n%s", r)
	}
}

func TestBetweenHalfOpen(t *testing.T) {
	var got []time.Duration
	for _, a := range mockprovider.Between(synthetic(), t0.Add(20*ms), t0.Add(50*ms)) {
		got = append(got, a.At.Sub(t0))
	}
	slices.Sort(got)
	if want := []time.Duration{20 * ms, 30 * ms, 40 * ms}; !slices.Equal(got, want) {
		t.Errorf("[20ms, 50ms): got %v, want %v", got, want)
	}
	if n := len(mockprovider.Between(synthetic(), time.Time{}, time.Time{})); n != 10 {
		t.Errorf("open range: got %d, want all 10", n)
	}
}

func TestReportText(t *testing.T) {
	text := mockprovider.Summarize(synthetic(), 100).String()
	for _, want := range []string{
		"arrivals", "10", "duplicates 3 (2 jobs)", "200: 7  400: 1  429: 1  500: 1",
		"mean/cap 1.000", "max in 1s", "max in 100ms", "cap 10", "p50 10ms",
		"vip", "default", "110ms", "140ms",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q:\n%s", want, text)
		}
	}
}

// equal compares the values of TestSummarize's checks.
func equal(a, b any) bool {
	switch x := a.(type) {
	case time.Time:
		return x.Equal(b.(time.Time))
	case map[int]int:
		y := b.(map[int]int)
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if y[k] != v {
				return false
			}
		}
		return true
	}
	return a == b
}
