package e2e_test

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// The promise is judged on the provider's arrival times alone. These
// helpers read them: the busiest sliding window of a given length, the mean
// rate over the saturated part of a run, and the arrivals in a time range.
//
// Windows are closed: [t, t+w] holds both ends. A schedule at exactly rate
// r with burst b then puts at most r×w + b arrivals in any window w, which
// is the bound the end-to-end tests assert.

// settle is cut from each end of a run to get its saturated part: the
// ramp-up (processes connecting, first slots) and the tail (the last jobs,
// fewer than the replicas could send) are not paced at the cap.
const settle = 500 * time.Millisecond

// arrivalTimes returns the arrival times of arr, sorted.
func arrivalTimes(arr []mockprovider.Arrival) []time.Time {
	ts := make([]time.Time, len(arr))
	for i, a := range arr {
		ts[i] = a.At
	}
	slices.SortFunc(ts, time.Time.Compare)
	return ts
}

// busiest returns the most of the sorted times that fall in one closed
// window [t, t+w], and where the first such window starts. The best window
// starts at one of the times, so two pointers find it in linear time: for
// each start i, j is the first time past times[i]+w.
func busiest(times []time.Time, w time.Duration) (n int, at time.Time) {
	j := 0
	for i, t := range times {
		end := t.Add(w)
		for j < len(times) && !times[j].After(end) {
			j++
		}
		if j-i > n {
			n, at = j-i, t
		}
	}
	return n, at
}

// saturated returns the span the mean is taken over, from the first
// arrival + settle to the last arrival − settle; ok is false when that
// span is shorter than one second (the run was too short to judge).
func saturated(times []time.Time) (from, to time.Time, ok bool) {
	if len(times) == 0 {
		return time.Time{}, time.Time{}, false
	}
	from, to = times[0].Add(settle), times[len(times)-1].Add(-settle)
	return from, to, to.Sub(from) >= time.Second
}

// span is a stretch of time [from, to).
type span struct{ from, to time.Time }

// meanRate returns the arrivals per second in the saturated part of the
// sorted times: those with from <= At < to, over to − from, leaving out
// the quiet spans (a fault, when nothing may be sent; they must not
// overlap). It returns 0 when the run is too short to have a saturated
// part of one second.
func meanRate(times []time.Time, quiet ...span) float64 {
	return rateOver(meanSpan(times, quiet...))
}

// rateOver is n per d, 0 when d is under a second (too short to judge).
func rateOver(n int, d time.Duration) float64 {
	if d < time.Second {
		return 0
	}
	return float64(n) / d.Seconds()
}

// meanSpan returns how many of the sorted times the mean counts and over
// how long: the saturated part, less the quiet spans.
func meanSpan(times []time.Time, quiet ...span) (int, time.Duration) {
	from, to, ok := saturated(times)
	if !ok {
		return 0, 0
	}
	n, d := len(within(times, from, to)), to.Sub(from)
	for _, q := range quiet {
		lo, hi := later(q.from, from), earlier(q.to, to)
		if hi.After(lo) {
			n -= len(within(times, lo, hi))
			d -= hi.Sub(lo)
		}
	}
	return n, d
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// within returns the sorted times with from <= t < to; a zero from or to
// leaves that end open.
func within(times []time.Time, from, to time.Time) []time.Time {
	lo, hi := 0, len(times)
	if !from.IsZero() {
		lo, _ = slices.BinarySearchFunc(times, from, time.Time.Compare)
	}
	if !to.IsZero() {
		hi, _ = slices.BinarySearchFunc(times, to, time.Time.Compare)
	}
	if hi < lo {
		return nil
	}
	return times[lo:hi]
}

// windowStats is what the provider saw in one run.
type windowStats struct {
	Count     int           // arrivals
	Max1s     int           // busiest closed 1s window
	Max100ms  int           // busiest closed 100ms window
	At1s      time.Time     // where the busiest 1s window starts
	At100ms   time.Time     // where the busiest 100ms window starts
	Mean      float64       // arrivals/s over the saturated part (0 when too short)
	MeanOver  time.Duration // how long the mean counts: the saturated part less the quiet spans
	SatFrom   time.Time     // the saturated part, first arrival + settle ...
	SatTo     time.Time     // ... to last arrival − settle
	Saturated bool          // the saturated part is at least 1s long
}

// statsOf computes the windowStats of the sorted times, the mean leaving
// out the quiet spans.
func statsOf(times []time.Time, quiet ...span) windowStats {
	s := windowStats{Count: len(times)}
	s.Max1s, s.At1s = busiest(times, time.Second)
	s.Max100ms, s.At100ms = busiest(times, 100*time.Millisecond)
	s.SatFrom, s.SatTo, s.Saturated = saturated(times)
	var n int
	n, s.MeanOver = meanSpan(times, quiet...)
	s.Mean = rateOver(n, s.MeanOver)
	return s
}

// countsPer returns how many of the sorted times fall in each step from
// from on, up to the last of them.
func countsPer(times []time.Time, from time.Time, step time.Duration) []int {
	var out []int
	for _, at := range times {
		if at.Before(from) { // (a duration's division truncates toward zero: the step before from would count as the first)
			continue
		}
		i := int(at.Sub(from) / step)
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}
