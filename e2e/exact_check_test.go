package e2e_test

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// promise is what the dispatchers of a cluster promise the provider,
// read from the SLUICE_PACER_* settings they were started with.
type promise struct {
	rate     float64       // pacer.rate, the cap
	burst    int           // pacer.burst (default 1)
	headroom float64       // pacer.headroom (default max_lateness/100ms; negative: none)
	maxLate  time.Duration // pacer.max_lateness (default 2ms)
	horizon  time.Duration // pacer.horizon (default 50ms)
}

// promiseOf reads the promise from env (the last setting of a name wins,
// as in the processes' environment).
func promiseOf(t *testing.T, rate float64, env []string) promise {
	t.Helper()
	p := promise{rate: rate, burst: 1, maxLate: 2 * time.Millisecond, horizon: 50 * time.Millisecond}
	headroom := math.NaN()
	for _, kv := range env {
		name, v, _ := strings.Cut(kv, "=")
		var err error
		switch name {
		case "SLUICE_PACER_BURST":
			p.burst, err = strconv.Atoi(v)
		case "SLUICE_PACER_HEADROOM":
			headroom, err = strconv.ParseFloat(v, 64)
		case "SLUICE_PACER_MAX_LATENESS":
			p.maxLate, err = time.ParseDuration(v)
		case "SLUICE_PACER_HORIZON":
			p.horizon, err = time.ParseDuration(v)
		}
		if err != nil {
			t.Fatalf("%s: %v", kv, err)
		}
	}
	switch {
	case math.IsNaN(headroom) || headroom == 0:
		p.headroom = float64(p.maxLate) / float64(100*time.Millisecond)
	case headroom < 0:
		p.headroom = 0
	default:
		p.headroom = headroom
	}
	return p
}

// max1s and max100ms are the most arrivals a closed window of that length
// may hold: cap × length + burst.
func (p promise) max1s() int    { return int(math.Floor(p.rate+1e-9)) + p.burst }
func (p promise) max100ms() int { return int(math.Floor(p.rate/10+1e-9)) + p.burst }

// minMean is the least mean rate over the saturated part: 99% of the
// schedule's rate, cap × (1 − headroom). Runs on a quiet machine measure
// 0.998–1.0 of it.
func (p promise) minMean() float64 { return minMeanShare * p.rate * (1 - p.headroom) }

// minMeanShare is the share of the schedule's rate the mean must reach.
const minMeanShare = 0.99

// minRawMean is the least mean rate at the provider on a machine so
// loaded that its scheduler runs senders more than max_lateness late: the
// slots they gave up (sluice_pacer_slots_forfeited_total{reason="late"},
// never sent late, by design) may then account for the rest of minMean,
// down to this share of the schedule's rate. Runs with two busy loops
// holding both cores of a 2-core machine forfeit about 2% of the slots.
func (p promise) minRawMean() float64 { return minRawMeanShare * p.rate * (1 - p.headroom) }

// minRawMeanShare is minRawMean's share of the schedule's rate.
const minRawMeanShare = 0.90

// stopsBy is how long after the last successful pacer call arrivals may
// still come: a slot is granted at most one horizon ahead of the call
// that granted it, its request leaves at most max_lateness after the slot,
// and reaches the provider within one loopback round trip (10ms here).
func (p promise) stopsBy() time.Duration { return p.horizon + p.maxLate + 10*time.Millisecond }

// checkExact asserts the promise on every arrival the provider saw: each
// id delivered, the busiest 1s and 100ms windows within cap × length +
// burst, and the mean over the saturated part (leaving out quiet spans,
// and the test process's stalls with their arrivals: stallMeter) at least
// 99% of cap × (1 − headroom), or at least 90% of it with the slots the
// replicas gave up as late making up the rest. It logs the figures and
// returns them.
func checkExact(t *testing.T, c *cluster, rate float64, ids []string, quiet ...span) windowStats {
	t.Helper()
	p := promiseOf(t, rate, c.env)
	arr := c.prov.Arrivals()
	stalls := c.stalls.stalls()
	_, stalled := merged(stalls)
	quiet, _ = merged(slices.Concat(quiet, stalls))
	s := statsOf(arrivalTimes(arr), quiet...)
	t.Logf("the test process paused %d times for over %s, %s in all: left out of the mean with their arrivals", len(stalls), stallMin, stalled)
	t.Logf("%s, cap %g/s: %d arrivals; busiest 1s %d (bound %d), busiest 100ms %d (bound %d); mean %.1f/s = %.3f of cap over %s (bound %.3f)",
		t.Name(), rate, s.Count, s.Max1s, p.max1s(), s.Max100ms, p.max100ms(),
		s.Mean, s.Mean/rate, s.SatTo.Sub(s.SatFrom).Round(10*time.Millisecond), p.minMean()/rate)
	late := 0.0   // slots the replicas gave up as late, over the whole run (0 when one cannot tell)
	lapsed := 0.0 // slots that passed with no replica asking for them, over the whole run (0 when one cannot tell)
	if m, err := scrapeAll(c); err == nil {
		t.Logf("replicas: lateness p50/p99/max %s; forfeited %s; lapsed %.0f (no replica asked for them: in time, or after the backlog ran out)",
			m.latenessText(), m.forfeitText(), m.lapsed)
		late, lapsed = m.forfeited["late"], m.lapsed
	}
	delivered := map[string]bool{}
	for _, a := range arr {
		if a.Delivered() {
			delivered[a.JobID] = true
		}
	}
	lost := 0
	for _, id := range ids {
		if !delivered[id] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d jobs never delivered", lost, len(ids))
	}
	if s.Max1s > p.max1s() {
		t.Errorf("%d arrivals in the 1s from %s; want at most cap + burst = %d", s.Max1s, s.At1s.Format("15:04:05.000"), p.max1s())
	}
	if s.Max100ms > p.max100ms() {
		t.Errorf("%d arrivals in the 100ms from %s; want at most cap/10 + burst = %d", s.Max100ms, s.At100ms.Format("15:04:05.000"), p.max100ms())
		times := arrivalTimes(arr)
		t.Logf("that window (%v after the first arrival) holds, in ms after its start: %s",
			s.At100ms.Sub(times[0]).Round(time.Millisecond), offsetsText(arr, s.At100ms, 100*time.Millisecond))
	}
	switch {
	case !s.Saturated:
		t.Errorf("the run's saturated part is shorter than 1s (%d arrivals from %s to %s): too short to judge the mean", s.Count, s.SatFrom, s.SatTo)
	case s.Mean >= p.minMean():
	case s.Mean >= p.minRawMean() && s.Mean+late/s.MeanOver.Seconds() >= p.minMean():
		t.Logf("mean %.1f/s is under %.1f/s; with the %.0f slots the replicas gave up as late (the machine ran them more than %s late) it is %.1f/s: the schedule ran at its rate",
			s.Mean, p.minMean(), late, p.maxLate, s.Mean+late/s.MeanOver.Seconds())
	default:
		t.Errorf("mean %.1f/s over the saturated part; want at least %.2f × cap × (1 − headroom %.3f) = %.1f/s, "+
			"or at least %.1f/s with the slots given up as late making up the rest (%.0f given up: %.1f/s)",
			s.Mean, minMeanShare, p.headroom, p.minMean(), p.minRawMean(), late, s.Mean+late/s.MeanOver.Seconds())
		if lapsed > 0 {
			t.Logf("%.0f slots of the whole run passed with no replica asking for them (as %.1f/s of the saturated part, %.1f/s with the late ones "+
				"and the mean): moments when every replica was held up, or after the backlog ran out",
				lapsed, lapsed/s.MeanOver.Seconds(), s.Mean+(late+lapsed)/s.MeanOver.Seconds())
		}
	}
	return s
}

// checkQuiet asserts that none of times falls after event + after and
// before until, and logs how late the last one before until came.
func checkQuiet(t *testing.T, what string, times []time.Time, event, until time.Time, after time.Duration) {
	t.Helper()
	late := within(times, event.Add(after).Add(time.Nanosecond), until)
	lastGap := "none"
	if w := within(times, event, until); len(w) > 0 {
		lastGap = w[len(w)-1].Sub(event).Round(100 * time.Microsecond).String()
	}
	t.Logf("%s: %d arrivals in the %s after it, the last %s after it; %d later than %s (want 0)",
		what, len(within(times, event, until)), until.Sub(event).Round(time.Millisecond), lastGap, len(late), after)
	if len(late) > 0 {
		t.Errorf("%s: %d arrivals later than %s after it, the first %s after it; want none until %s after it",
			what, len(late), after, late[0].Sub(event).Round(100*time.Microsecond), until.Sub(event).Round(time.Millisecond))
	}
}

// long skips t unless SLUICE_LONG is set (make test-long).
func long(t *testing.T) {
	t.Helper()
	if !isLong() {
		t.Skip("set SLUICE_LONG=1 (make test-long) to run the longer end-to-end cases")
	}
}

// isLong reports whether the longer cases run (SLUICE_LONG set).
func isLong() bool { return os.Getenv("SLUICE_LONG") != "" }

// exactName names a case.
func exactName(backend string, replicas int, rate float64) string {
	return fmt.Sprintf("%s/%dx/cap%g", backend, replicas, rate)
}

// offsetsText lists the arrivals in [from, from+w] as milliseconds after
// from, each followed by its sender when its URI names one (senders).
func offsetsText(arr []mockprovider.Arrival, from time.Time, w time.Duration) string {
	var b strings.Builder
	arr = slices.Clone(arr)
	slices.SortFunc(arr, func(x, y mockprovider.Arrival) int { return x.At.Compare(y.At) })
	for _, a := range arr {
		if a.At.Before(from) || a.At.After(from.Add(w)) {
			continue
		}
		fmt.Fprintf(&b, "%.2f", float64(a.At.Sub(from))/float64(time.Millisecond))
		if r := senderOf(a); r != "" {
			fmt.Fprintf(&b, "(%s)", r)
		}
		b.WriteByte(' ')
	}
	return b.String()
}
