package mockprovider

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// CapacityWindow is the sliding window over which Config.Capacity is
// enforced.
const CapacityWindow = time.Second

// capacityGate enforces a true capacity, as a provider with a limit of its
// own does: it accepts at most rate requests in any sliding window of
// CapacityWindow, counting only the requests it accepted.
type capacityGate struct {
	mu       sync.Mutex
	rate     float64     // 0: no limit
	accepted []time.Time // times of accepted requests within the window, oldest first
}

// admit reports whether a request at at fits, and counts it when it does.
func (g *capacityGate) admit(at time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.rate <= 0 {
		return true
	}
	from := at.Add(-CapacityWindow)
	i := 0
	for i < len(g.accepted) && !g.accepted[i].After(from) {
		i++
	}
	g.accepted = g.accepted[i:]
	if float64(len(g.accepted)) >= math.Floor(g.rate*CapacityWindow.Seconds()) {
		return false
	}
	g.accepted = append(g.accepted, at)
	return true
}

func (g *capacityGate) set(rate float64) {
	g.mu.Lock()
	g.rate = rate
	g.mu.Unlock()
}

// SetCapacity changes Config.Capacity while the provider runs; 0 removes
// the limit.
func (p *Provider) SetCapacity(perSecond float64) {
	p.capacity.set(max(perSecond, 0))
}

// overCapacity is the answer to a request over the capacity: 429 with a
// Retry-After of one second, as providers with a per-second limit send.
func overCapacity() Answer {
	return Answer{Status: http.StatusTooManyRequests, RetryAfter: time.Second,
		Body: `{"error":"rate limit exceeded","code":"too_many_requests"}`}
}

// serveCapacity answers POST /capacity?rps=N: the capacity becomes N
// requests per second (0 for none).
func (p *Provider) serveCapacity(w http.ResponseWriter, r *http.Request) {
	v, err := strconv.ParseFloat(r.URL.Query().Get("rps"), 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		writeJSONError(w, http.StatusBadRequest, "rps: must be a rate of at least 0 requests per second")
		return
	}
	p.SetCapacity(v)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"capacity":` + strconv.FormatFloat(v, 'f', -1, 64) + "}\n"))
}
