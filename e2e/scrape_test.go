package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape is one replica's /metrics, read for the few series the
// provider-side tables print: a histogram's buckets and counters by label.

// sample is one line of the Prometheus text format: name{labels} value.
var sample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)`)

// label reads label="value" out of a {…} label set.
func label(set, name string) string {
	m := regexp.MustCompile(name + `="([^"]*)"`).FindStringSubmatch(set)
	if m == nil {
		return ""
	}
	return m[1]
}

// histogram is a cumulative Prometheus histogram: counts at or below each
// upper bound, +Inf last.
type histogram struct {
	le    []float64
	count []float64
}

// add folds another replica's buckets into h (same bounds expected; a
// bound h lacks is added).
func (h *histogram) add(le, n float64) {
	i, found := slices.BinarySearch(h.le, le)
	if !found {
		h.le = slices.Insert(h.le, i, le)
		h.count = slices.Insert(h.count, i, 0)
	}
	h.count[i] += n
}

// total is the number of observations.
func (h *histogram) total() float64 {
	if len(h.count) == 0 {
		return 0
	}
	return h.count[len(h.count)-1]
}

// quantile estimates the q-quantile (0 < q <= 1) as histogram_quantile
// does: linear within the bucket that holds it, the lower bound of the
// first bucket taken as 0, and the last finite bound when it falls in +Inf.
// ok is false when there are no observations.
func (h *histogram) quantile(q float64) (v float64, ok bool) {
	n := h.total()
	if n == 0 {
		return 0, false
	}
	rank := q * n
	prevLE, prevN := 0.0, 0.0
	for i, le := range h.le {
		if h.count[i] >= rank {
			if math.IsInf(le, 1) {
				return prevLE, true
			}
			if h.count[i] == prevN {
				return le, true
			}
			return prevLE + (le-prevLE)*(rank-prevN)/(h.count[i]-prevN), true
		}
		prevLE, prevN = le, h.count[i]
	}
	return prevLE, true
}

// highest is the upper bound of the highest bucket with an observation in
// it: an upper estimate of the maximum. ok is false when there is none.
func (h *histogram) highest() (v float64, ok bool) {
	prev := 0.0
	for i, le := range h.le {
		if h.count[i] > prev {
			v, ok = le, true
		}
		prev = h.count[i]
	}
	return v, ok
}

// metricSet is what the tables read from the replicas.
type metricSet struct {
	lateness  histogram          // sluice_send_lateness_seconds, summed
	seen      bool               // the lateness histogram was exposed at all
	forfeited map[string]float64 // sluice_pacer_slots_forfeited_total by reason, summed
	effective float64            // sluice_pacer_effective_rate, the last replica's
	cuts      float64            // sluice_pacer_rate_cuts_total, summed
	holds     float64            // sluice_pacer_holds_total, summed
	rides     float64            // sluice_pacer_rides_total, summed
	lapsed    float64            // sluice_pacer_slots_lapsed_total, summed
	calls     float64            // sluice_pacer_calls_total, summed
	reports   float64            // sluice_pacer_feedback_reports_total, summed
	acks      float64            // sluice_ack_batches_total, summed
}

// parseMetrics folds one /metrics body into m.
func (m *metricSet) parseMetrics(r io.Reader) error {
	if m.forfeited == nil {
		m.forfeited = map[string]float64{}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s := sample.FindStringSubmatch(sc.Text())
		if s == nil {
			continue
		}
		v, err := strconv.ParseFloat(s[3], 64)
		if err != nil {
			continue
		}
		switch s[1] {
		case "sluice_send_lateness_seconds_bucket":
			le, err := strconv.ParseFloat(label(s[2], "le"), 64)
			if err != nil {
				return fmt.Errorf("scrape: bucket bound in %q: %w", sc.Text(), err)
			}
			m.lateness.add(le, v)
			m.seen = true
		case "sluice_pacer_slots_forfeited_total":
			m.forfeited[label(s[2], "reason")] += v
		case "sluice_pacer_effective_rate":
			m.effective = v
		case "sluice_pacer_rate_cuts_total":
			m.cuts += v
		case "sluice_pacer_holds_total":
			m.holds += v
		case "sluice_pacer_rides_total":
			m.rides += v
		case "sluice_pacer_slots_lapsed_total":
			m.lapsed += v
		case "sluice_pacer_calls_total":
			m.calls += v
		case "sluice_pacer_feedback_reports_total":
			m.reports += v
		case "sluice_ack_batches_total":
			m.acks += v
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("scrape: read: %w", err)
	}
	return nil
}

// scrapeAll reads /metrics of every replica of c that is still running.
func scrapeAll(c *cluster) (metricSet, error) {
	var m metricSet
	client := &http.Client{Timeout: 5 * time.Second}
	for _, p := range c.allProcs() {
		u, ok := p.metricsURL(10 * time.Second)
		if !ok {
			return m, fmt.Errorf("scrape: %s logged no metrics URL", p.name)
		}
		resp, err := client.Get(u)
		if err != nil {
			return m, fmt.Errorf("scrape %s: %w", p.name, err)
		}
		err = m.parseMetrics(resp.Body)
		resp.Body.Close()
		if err != nil {
			return m, fmt.Errorf("scrape %s: %w", p.name, err)
		}
	}
	return m, nil
}

// latenessText is "p50 … · p99 … · max ≤ …" from the lateness histogram,
// or "n/a" when no replica exposes it.
func (m metricSet) latenessText() string {
	if !m.seen || m.lateness.total() == 0 {
		return "n/a"
	}
	p50, _ := m.lateness.quantile(0.50)
	p99, _ := m.lateness.quantile(0.99)
	hi, _ := m.lateness.highest()
	d := func(s float64) string {
		if math.IsInf(s, 1) {
			return "+Inf"
		}
		return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
	}
	return fmt.Sprintf("%s / %s / ≤%s", d(p50), d(p99), d(hi))
}

// forfeitText is "unclaimed N · stale N · late N", or "n/a".
func (m metricSet) forfeitText() string {
	if len(m.forfeited) == 0 {
		return "n/a"
	}
	var parts []string
	for _, r := range []string{"unclaimed", "stale", "late"} {
		parts = append(parts, fmt.Sprintf("%s %.0f", r, m.forfeited[r]))
	}
	for r, v := range m.forfeited {
		if !slices.Contains([]string{"unclaimed", "stale", "late"}, r) {
			parts = append(parts, fmt.Sprintf("%s %.0f", r, v))
		}
	}
	return strings.Join(parts, " · ")
}

// TestPprofOnlyWhenAsked: metrics.pprof serves Go's profiles on the
// metrics listener; without it /debug/pprof/ is not there.
func TestPprofOnlyWhenAsked(t *testing.T) {
	c := newCluster(t, "redis", 100)
	on := c.startWith(1, []string{"SLUICE_METRICS_PPROF=true"})[0]
	off := c.start(1)[0]
	for _, tc := range []struct {
		p    *proc
		want int
	}{{on, http.StatusOK}, {off, http.StatusNotFound}} {
		u, ok := tc.p.metricsURL(30 * time.Second)
		if !ok {
			t.Fatalf("%s logged no metrics URL", tc.p.name)
		}
		resp, err := http.Get(strings.TrimSuffix(u, "/metrics") + "/debug/pprof/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: GET /debug/pprof/cmdline: %s, want %d", tc.p.name, resp.Status, tc.want)
		}
	}
}
