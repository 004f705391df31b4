package mockprovider

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Report summarises a set of arrivals. Durations are in nanoseconds in JSON.
type Report struct {
	// First and Last are the first and last arrival times; zero when Count is 0.
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
	// Span is Last - First.
	Span time.Duration `json:"span_ns"`
	// Count is the number of arrivals (every request, whatever its answer).
	Count int `json:"count"`
	// Delivered is the number answered 2xx.
	Delivered int `json:"delivered"`
	// Statuses counts the arrivals per status answered.
	Statuses map[int]int `json:"statuses"`
	// Duplicates is the number of 2xx answers beyond the first for the same
	// job (by job id, else idempotency key): a job delivered three times
	// adds 2.
	Duplicates int `json:"duplicates"`
	// DuplicateJobs is the number of jobs answered 2xx more than once.
	DuplicateJobs int `json:"duplicate_jobs"`
	// MeanRate is the request rate the provider saw, per second: the
	// Count-1 intervals between the first and last arrival over Span, so
	// that n requests evenly paced at r/s give exactly r. The provider's
	// cap bounds this rate; it is 0 with fewer than two arrivals.
	MeanRate float64 `json:"mean_rate"`
	// DeliveredRate is the 2xx part of MeanRate: MeanRate * Delivered/Count.
	DeliveredRate float64 `json:"delivered_rate"`
	// Cap is Config.Cap, requests per second; 0 when unknown.
	Cap float64 `json:"cap,omitempty"`
	// MeanOverCap is MeanRate/Cap; 0 when Cap is unknown.
	MeanOverCap float64 `json:"mean_over_cap,omitempty"`
	// Max1s is the most arrivals in any half-open window [t, t+1s).
	Max1s int `json:"max_1s"`
	// Max100ms is the most arrivals in any half-open window [t, t+100ms).
	Max100ms int `json:"max_100ms"`
	// InterArrivalP50 and InterArrivalP99 are percentiles (nearest rank) of
	// the gaps between consecutive arrivals.
	InterArrivalP50 time.Duration `json:"inter_arrival_p50_ns"`
	InterArrivalP99 time.Duration `json:"inter_arrival_p99_ns"`
	// Lanes has one entry per lane seen, by lane name.
	Lanes []LaneReport `json:"lanes"`
	// Dropped is how many arrivals were forgotten because Config.MaxArrivals
	// was reached (set by Provider.Report, not by Summarize).
	Dropped int64 `json:"dropped"`
}

// LaneReport summarises the arrivals of one lane.
type LaneReport struct {
	// Lane is the X-Sluice-Lane header; empty for requests without one.
	Lane string `json:"lane"`
	// Count is the number of arrivals in the lane.
	Count int `json:"count"`
	// Delivered is the number answered 2xx.
	Delivered int `json:"delivered"`
	// Latency percentiles (nearest rank) and maximum of arrival time minus
	// X-Sluice-Enqueued-At, over the lane's arrivals that carried one
	// (LatencyCount of them), retries included.
	LatencyCount int           `json:"latency_count"`
	LatencyP50   time.Duration `json:"latency_p50_ns"`
	LatencyP99   time.Duration `json:"latency_p99_ns"`
	LatencyMax   time.Duration `json:"latency_max_ns"`
}

// Between returns the arrivals with since <= At < until, in their order; a
// zero since or until leaves that end open.
func Between(arrivals []Arrival, since, until time.Time) []Arrival {
	out := make([]Arrival, 0, len(arrivals))
	for _, a := range arrivals {
		if (!since.IsZero() && a.At.Before(since)) || (!until.IsZero() && !a.At.Before(until)) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// Summarize computes the Report of arrivals, in any order, for a provider
// capped at capRate requests per second (0 when unknown).
func Summarize(arrivals []Arrival, capRate float64) Report {
	sorted := slices.Clone(arrivals)
	slices.SortStableFunc(sorted, func(a, b Arrival) int { return a.At.Compare(b.At) })
	r := Report{Count: len(sorted), Statuses: map[int]int{}, Cap: capRate, Lanes: []LaneReport{}}
	times := make([]time.Time, len(sorted))
	for i, a := range sorted {
		times[i] = a.At
		r.Statuses[a.Status]++
		if a.Delivered() {
			r.Delivered++
		}
	}
	r.Duplicates, r.DuplicateJobs = duplicates(sorted)
	r.Lanes = lanes(sorted)
	if len(sorted) == 0 {
		return r
	}
	r.First, r.Last = times[0], times[len(times)-1]
	r.Span = r.Last.Sub(r.First)
	if r.Span > 0 {
		r.MeanRate = float64(r.Count-1) / r.Span.Seconds()
		r.DeliveredRate = r.MeanRate * float64(r.Delivered) / float64(r.Count)
	}
	if capRate > 0 {
		r.MeanOverCap = r.MeanRate / capRate
	}
	r.Max1s = MaxInWindow(times, time.Second)
	r.Max100ms = MaxInWindow(times, 100*time.Millisecond)
	gaps := make([]time.Duration, 0, len(times))
	for i := 1; i < len(times); i++ {
		gaps = append(gaps, times[i].Sub(times[i-1]))
	}
	slices.Sort(gaps)
	r.InterArrivalP50, r.InterArrivalP99 = Percentile(gaps, 50), Percentile(gaps, 99)
	return r
}

// MaxInWindow returns the most times falling in any half-open window
// [t, t+w), for times sorted in ascending order. The best window starts at
// one of the times, so two pointers find it in linear time: for each start
// i, j is the first time at or past times[i]+w.
func MaxInWindow(times []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range times {
		j = max(j, i)
		for j < len(times) && times[j].Sub(times[i]) < w {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values at
// or below it. It returns 0 for no values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// duplicates counts 2xx answers beyond the first per job, and such jobs.
func duplicates(arrivals []Arrival) (extra, jobs int) {
	delivered := map[string]int{}
	for _, a := range arrivals {
		if id := a.identity(); id != "" && a.Delivered() {
			delivered[id]++
		}
	}
	for _, n := range delivered {
		if n > 1 {
			extra += n - 1
			jobs++
		}
	}
	return extra, jobs
}

// lanes summarises arrivals per lane, sorted by lane name.
func lanes(arrivals []Arrival) []LaneReport {
	type acc struct {
		LaneReport
		lat []time.Duration
	}
	by := map[string]*acc{}
	for _, a := range arrivals {
		l := by[a.Lane]
		if l == nil {
			l = &acc{LaneReport: LaneReport{Lane: a.Lane}}
			by[a.Lane] = l
		}
		l.Count++
		if a.Delivered() {
			l.Delivered++
		}
		if !a.EnqueuedAt.IsZero() {
			l.lat = append(l.lat, a.At.Sub(a.EnqueuedAt))
		}
	}
	out := make([]LaneReport, 0, len(by))
	for _, l := range by {
		slices.Sort(l.lat)
		l.LatencyCount = len(l.lat)
		l.LatencyP50, l.LatencyP99 = Percentile(l.lat, 50), Percentile(l.lat, 99)
		if n := len(l.lat); n > 0 {
			l.LatencyMax = l.lat[n-1]
		}
		out = append(out, l.LaneReport)
	}
	slices.SortFunc(out, func(a, b LaneReport) int { return cmp.Compare(a.Lane, b.Lane) })
	return out
}
