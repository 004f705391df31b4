package dispatch

import (
	"maps"
	"sync"
)

// sentCounts counts the requests a replica sent, per lane, from its start:
// the replica announces them with its heartbeat, and the console sums the
// live replicas' counts and differentiates them into the cluster's
// achieved rate per lane.
type sentCounts struct {
	mu sync.Mutex
	n  map[string]int64
}

func (s *sentCounts) add(lane string) {
	s.mu.Lock()
	if s.n == nil {
		s.n = map[string]int64{}
	}
	s.n[lane]++
	s.mu.Unlock()
}

// Sent returns how many requests this engine sent to the provider, per
// lane, since it started: every request written, whatever the answer
// (slots forfeited before a request could leave are not counted).
func (e *Engine) Sent() map[string]int64 {
	e.sent.mu.Lock()
	defer e.sent.mu.Unlock()
	out := maps.Clone(e.sent.n)
	if out == nil {
		out = map[string]int64{}
	}
	for _, l := range e.buf.names {
		out[l] += 0
	}
	return out
}

// Held returns how many fetched jobs this engine holds for their slots,
// unsent: with the requests open (InFlight), what the queue counts as in
// flight for this replica.
func (e *Engine) Held() int {
	n := 0
	for i := range e.buf.names {
		n += e.buf.len(i)
	}
	return n
}
