package api

import (
	"context"
	"net/http"
)

// Status is the answer of GET /v1/queues/{queue}: the figures of
// `dispatcher status`.
type Status struct {
	Queue       string       `json:"queue"`
	Backend     string       `json:"backend,omitempty"`
	Lanes       []LaneStatus `json:"lanes"`
	DeadLetters int64        `json:"dead_letters"`
	Rate        *RateStatus  `json:"rate,omitempty"`
}

// LaneStatus is one lane's counts.
type LaneStatus struct {
	Lane             string  `json:"lane"`
	Ready            int64   `json:"ready"`
	Delayed          int64   `json:"delayed"`
	InFlight         int64   `json:"in_flight"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
}

// RateStatus is the pacer's state and the live replicas.
type RateStatus struct {
	// Configured is pacer.rate; Effective what the cluster runs at now
	// (an override, or lowered after throttling).
	Configured float64 `json:"configured"`
	Effective  float64 `json:"effective"`
	// Override is the rate set with `dispatcher set-rate`, 0 when none.
	Override float64 `json:"override"`
	Paused   bool    `json:"paused"`
	// ThrottledForSeconds is how long the provider's Retry-After still
	// holds the cluster back, 0 when it does not.
	ThrottledForSeconds float64 `json:"throttled_for_seconds"`
	// Replicas is the number of live dispatcher replicas.
	Replicas int `json:"replicas"`
}

// status handles GET /v1/queues/{queue}.
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.Timeout)
	defer cancel()
	st, err := s.opts.Inspector.Stats(ctx)
	if err != nil {
		s.backendError(w, r, "stats", err, 0)
		return
	}
	out := Status{Queue: s.opts.Queue, Backend: s.opts.Backend, Lanes: make([]LaneStatus, len(st.Lanes)), DeadLetters: st.DeadLetters}
	for i, l := range st.Lanes {
		out.Lanes[i] = LaneStatus{Lane: l.Lane, Ready: l.Ready, Delayed: l.Delayed, InFlight: l.InFlight, OldestAgeSeconds: l.OldestAge.Seconds()}
	}
	if s.opts.Rate != nil {
		if out.Rate, err = s.opts.Rate(ctx); err != nil {
			s.backendError(w, r, "rate", err, 0)
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
}
