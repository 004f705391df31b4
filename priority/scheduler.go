package priority

import "fmt"

// Scheduler chooses the lane that takes the next pacer slot, given which
// lanes have a job ready. Build one with NewScheduler.
//
// Under Strict it always chooses the highest ready lane. Under Weighted it
// runs smooth weighted round-robin (the algorithm of nginx's upstream
// balancer) over the ready lanes only: each call adds every ready lane's
// weight to that lane's running credit, chooses the lane with the most
// credit (the higher lane on a tie) and takes the sum of the ready lanes'
// weights off the chosen lane's credit. While a set of lanes stays ready,
// every run of W consecutive choices (W the sum of their weights) gives
// each of them exactly its weight, spread out rather than in bursts, and a
// lane's count after any number of choices stays within one of its exact
// share. A lane that is not ready is skipped and its credit kept as it is,
// so it neither gains a share for the time it had nothing to send nor
// escapes a debt: credit stays bounded, and no ready lane waits more than
// about one round of the weights. The choices are deterministic.
//
// A Scheduler is not safe for concurrent use: the caller serialises calls
// to Next (the dispatch engine calls it under its own lock).
type Scheduler struct {
	policy  Policy
	weights []int
	credit  []int
}

// NewScheduler returns a scheduler for the lanes and policy of cfg. It
// applies SetDefaults to a copy of cfg and returns Validate's error, if
// any, wrapping ErrInvalidConfig.
func NewScheduler(cfg Config) (*Scheduler, error) {
	cfg.Lanes = append([]Lane(nil), cfg.Lanes...)
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("priority: new scheduler: %w", err)
	}
	s := &Scheduler{
		policy:  cfg.Policy,
		weights: make([]int, len(cfg.Lanes)),
		credit:  make([]int, len(cfg.Lanes)),
	}
	for i, l := range cfg.Lanes {
		s.weights[i] = l.Weight
	}
	return s, nil
}

// Next returns the index (in Config.Lanes) of the lane that takes the next
// slot, among the lanes i with ready[i] true, and ok true; it returns ok
// false, and changes nothing, when no lane is ready. Entries of ready past
// the last lane are ignored and missing ones count as not ready. Under
// Weighted, each call with ok true counts as one choice made.
func (s *Scheduler) Next(ready []bool) (lane int, ok bool) {
	n := min(len(ready), len(s.weights))
	if s.policy == Strict {
		for i := range n {
			if ready[i] {
				return i, true
			}
		}
		return 0, false
	}
	total, best := 0, -1
	for i := range n {
		if !ready[i] {
			continue
		}
		s.credit[i] += s.weights[i]
		total += s.weights[i]
		if best < 0 || s.credit[i] > s.credit[best] {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	s.credit[best] -= total
	return best, true
}

// Reset forgets the credit of every lane, as if the scheduler were new.
func (s *Scheduler) Reset() { clear(s.credit) }

// Len returns the number of lanes.
func (s *Scheduler) Len() int { return len(s.weights) }
