package console

import (
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/pacer"
)

// Point is the cluster at one heartbeat of the replica that keeps the
// History.
type Point struct {
	At time.Time `json:"at"` // Redis clock
	// Lanes is the achieved rate per lane, requests per second, summed
	// over the live replicas.
	Lanes map[string]float64 `json:"lanes"`
	// Achieved is the sum of Lanes.
	Achieved float64 `json:"achieved"`
	// Effective is the rate the schedule ran at (pacer.State.EffectiveRate).
	Effective float64 `json:"effective"`
	// Cap is the configured rate, or the operator's override when set.
	Cap    float64 `json:"cap"`
	Paused bool    `json:"paused"`
}

// History turns the live replicas' reports into the cluster's achieved
// rate per lane over time. Each replica's rate is the change of its sent
// counts between its last two reports, divided by the time between them
// (Redis clock); the cluster's is the sum over the replicas live now, so a
// replica that stops drops out rather than pulling the sum below zero.
// History is safe for concurrent use; the zero value is not ready, use
// NewHistory.
type History struct {
	keep time.Duration

	mu     sync.Mutex
	last   map[string]sample             // per replica id: its last report
	rates  map[string]map[string]float64 // per replica id: per lane rate
	points []Point
}

type sample struct {
	seen time.Time
	sent map[string]int64
}

// NewHistory returns a history that keeps points for keep.
func NewHistory(keep time.Duration) *History {
	return &History{keep: keep, last: map[string]sample{}, rates: map[string]map[string]float64{}}
}

// Observe adds a point from the live replicas' reports (as Announce
// returns them) and the schedule's state. st may be nil when it could not
// be read: the point then carries the previous rates of the schedule.
func (h *History) Observe(st *pacer.State, live []pacer.Replica) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := Point{Lanes: map[string]float64{}}
	seen := map[string]bool{}
	for _, r := range live {
		seen[r.ID] = true
		h.update(r)
		for lane, v := range h.rates[r.ID] {
			p.Lanes[lane] += v
		}
		if r.LastSeen.After(p.At) {
			p.At = r.LastSeen
		}
	}
	for id := range h.last {
		if !seen[id] {
			delete(h.last, id)
			delete(h.rates, id)
		}
	}
	for _, v := range p.Lanes {
		p.Achieved += v
	}
	if n := len(h.points); n > 0 {
		prev := h.points[n-1]
		p.Effective, p.Cap, p.Paused = prev.Effective, prev.Cap, prev.Paused
	}
	if st != nil {
		p.At = st.Now
		p.Effective, p.Paused = st.EffectiveRate, st.Paused
		p.Cap = st.ConfiguredRate
		if st.RateOverride > 0 {
			p.Cap = st.RateOverride
		}
	}
	if p.At.IsZero() {
		return
	}
	h.points = append(h.points, p)
	from := 0
	for from < len(h.points) && p.At.Sub(h.points[from].At) > h.keep {
		from++
	}
	h.points = slices.Delete(h.points, 0, from)
}

// update takes replica r's report: when it is newer than the last one
// seen, the replica's rate per lane becomes the change between the two.
func (h *History) update(r pacer.Replica) {
	rep := ParseReport(r.Report)
	prev, ok := h.last[r.ID]
	if ok && !r.LastSeen.After(prev.seen) {
		return
	}
	h.last[r.ID] = sample{seen: r.LastSeen, sent: rep.Sent}
	if !ok {
		return
	}
	dt := r.LastSeen.Sub(prev.seen).Seconds()
	rates := map[string]float64{}
	for lane, n := range rep.Sent {
		if d := n - prev.sent[lane]; d >= 0 {
			rates[lane] = float64(d) / dt
		}
	}
	h.rates[r.ID] = rates
}

// Points returns the points kept, oldest first.
func (h *History) Points() []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.points)
}
