package console

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
)

// LiveWindow is how long a replica counts as live after its last
// heartbeat.
const LiveWindow = 10 * time.Second

// readTimeout bounds each of Collect's reads, so that a backend that is
// down costs the others no more than this.
const readTimeout = 3 * time.Second

// Sources are what a Snapshot is read from. Each part may be missing, with
// the error that kept it from being opened: the snapshot then shows the
// others and says why that part is not there.
type Sources struct {
	Queue   string // queue.name
	Backend string // queue.backend
	// Stats reads the queue's lanes; nil when the queue could not be
	// opened (StatsErr says why).
	Stats    queue.Inspector
	StatsErr error
	// Controls and Members read the pacer's state and the live replicas;
	// nil when Redis could not be reached (PacerErr says why).
	Controls *pacer.Controls
	Members  *pacer.Members
	PacerErr error
	// History, when set, gives the achieved rates.
	History *History
	// ConfiguredRate and ConfiguredBurst stand in for the configured
	// values the schedule learns from the replicas' calls, until one has
	// called (an admin command's configuration may have them); zero when
	// unknown.
	ConfiguredRate  float64
	ConfiguredBurst int
}

// Snapshot is the cluster at a moment, as the console's page and
// `dispatcher status --json` show it.
type Snapshot struct {
	Queue   string    `json:"queue"`
	Backend string    `json:"backend"`
	At      time.Time `json:"at"` // Redis clock when the pacer answered
	// Lanes are in priority order; empty when QueueError is set.
	Lanes []Lane `json:"lanes"`
	// LanesAssumed says that the lanes are the default ones, not read from
	// the dispatchers' configuration (dispatcher status without a file or
	// SLUICE_QUEUE_LANES): they may not be the dispatchers' lanes.
	LanesAssumed bool   `json:"lanes_assumed,omitempty"`
	DeadLetters  int64  `json:"dead_letters"`
	QueueError   string `json:"queue_error,omitempty"`
	// Pacer is nil when PacerError is set.
	Pacer      *Pacer `json:"pacer"`
	PacerError string `json:"pacer_error,omitempty"`
	// Replicas are the live replicas; ReplicasError when they could not
	// be read.
	Replicas      []Replica `json:"replicas"`
	ReplicasError string    `json:"replicas_error,omitempty"`
	// History is the achieved rate over the last minutes (the console's
	// replica's heartbeats); absent from the CLI, which keeps none.
	History []Point `json:"history,omitempty"`
}

// Lane is one lane's backlog.
type Lane struct {
	Name     string `json:"name"`
	Ready    int64  `json:"ready"`
	Delayed  int64  `json:"delayed"`
	InFlight int64  `json:"in_flight"` // fetched by a replica, unsettled: held for a slot or being sent
	// OldestSeconds is the age of the oldest ready job: how long the next
	// one has waited.
	OldestSeconds float64 `json:"oldest_seconds"`
	// Consumers is how many consumers the lane's group holds (live
	// replicas, and dead ones not yet removed after
	// queue.consumer_idle_limit); absent where the backend has none per
	// replica (JetStream's lane consumers are shared).
	Consumers *int64 `json:"consumers,omitempty"`
}

// consumerCounter is a queue whose lanes have a consumer per replica
// (redisq).
type consumerCounter interface {
	Consumers(ctx context.Context) (map[string]int64, error)
}

// Pacer is the schedule's state.
type Pacer struct {
	ConfiguredRate  float64 `json:"configured_rate"`
	RateOverride    float64 `json:"rate_override"` // 0: none
	EffectiveRate   float64 `json:"effective_rate"`
	ConfiguredBurst int     `json:"configured_burst"`
	BurstOverride   int     `json:"burst_override"` // 0: none
	EffectiveBurst  int     `json:"effective_burst"`
	Paused          bool    `json:"paused"`
	// ThrottledUntil is the end of the provider's hold when it is still
	// on, else absent.
	ThrottledUntil *time.Time `json:"throttled_until,omitempty"`
	BacklogSeconds float64    `json:"backlog_seconds"` // how far the schedule runs ahead of now
	Adaptation     Adaptation `json:"adaptation"`
	// TenantOverrides are the operator's tenant rates (dispatcher
	// set-rate --tenant), slots/s by tenant; absent when none (or when
	// they could not be read).
	TenantOverrides map[string]float64 `json:"tenant_overrides,omitempty"`
}

// Adaptation is what the provider's answers did to the rate
// (pacer.Adaptation).
type Adaptation struct {
	Rate      float64   `json:"rate"`    // the effective rate
	Ceiling   float64   `json:"ceiling"` // the configured rate, or the override
	Episode   bool      `json:"episode"` // the provider is pushing back
	HeldUntil time.Time `json:"held_until,omitzero"`
	LastCut   time.Time `json:"last_cut,omitzero"`
	Cuts      int64     `json:"cuts"`
	Holds     int64     `json:"holds"`
	Tolerated float64   `json:"tolerated"` // share of throttling answers that do not follow the rate
}

// Replica is a live replica and its last report.
type Replica struct {
	ID             string  `json:"id"`
	SeenSecondsAgo float64 `json:"seen_seconds_ago"`
	Report
}

// Collect reads a snapshot from src; it never fails as a whole: a part
// that cannot be read carries its error.
func Collect(ctx context.Context, src Sources) Snapshot {
	s := Snapshot{Queue: src.Queue, Backend: src.Backend, Lanes: []Lane{}, Replicas: []Replica{}, At: time.Now()}
	s.collectQueue(ctx, src)
	s.collectPacer(ctx, src)
	if src.History != nil {
		s.History = src.History.Points()
	}
	return s
}

func (s *Snapshot) collectQueue(ctx context.Context, src Sources) {
	if src.Stats == nil {
		s.QueueError = errText(src.StatsErr, "the queue is not open")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	qs, err := src.Stats.Stats(ctx)
	if err != nil {
		s.QueueError = err.Error()
		return
	}
	var consumers map[string]int64
	if cc, ok := src.Stats.(consumerCounter); ok {
		consumers, _ = cc.Consumers(ctx) // a count it cannot read is left out
	}
	for _, l := range qs.Lanes {
		lane := Lane{Name: l.Lane, Ready: l.Ready, Delayed: l.Delayed, InFlight: l.InFlight,
			OldestSeconds: l.OldestAge.Seconds()}
		if n, ok := consumers[l.Lane]; ok {
			lane.Consumers = &n
		}
		s.Lanes = append(s.Lanes, lane)
	}
	s.DeadLetters = qs.DeadLetters
}

func (s *Snapshot) collectPacer(ctx context.Context, src Sources) {
	if src.Controls == nil || src.Members == nil {
		s.PacerError = errText(src.PacerErr, "Redis is not open")
		s.ReplicasError = s.PacerError
		return
	}
	sctx, cancel := context.WithTimeout(ctx, readTimeout)
	st, err := src.Controls.State(sctx)
	cancel()
	if err != nil {
		s.PacerError = err.Error()
	} else {
		s.At = st.Now
		if st.ConfiguredRate == 0 && src.ConfiguredRate > 0 {
			st.ConfiguredRate = src.ConfiguredRate
			if st.RateOverride == 0 {
				st.EffectiveRate = src.ConfiguredRate
			}
		}
		if st.ConfiguredBurst == 0 && src.ConfiguredBurst > 0 {
			st.ConfiguredBurst = src.ConfiguredBurst
			if st.BurstOverride == 0 {
				st.EffectiveBurst = src.ConfiguredBurst
			}
		}
		s.Pacer = pacerView(st)
		tctx, cancel := context.WithTimeout(ctx, readTimeout)
		if tr, err := src.Controls.TenantRates(tctx); err == nil && len(tr) > 0 {
			s.Pacer.TenantOverrides = tr
		}
		cancel()
	}
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	reps, err := src.Members.Replicas(rctx, LiveWindow)
	cancel()
	if err != nil {
		s.ReplicasError = err.Error()
		return
	}
	for _, r := range reps {
		s.Replicas = append(s.Replicas, Replica{ID: r.ID, SeenSecondsAgo: max(0, s.At.Sub(r.LastSeen).Seconds()),
			Report: ParseReport(r.Report)})
	}
}

func pacerView(st pacer.State) *Pacer {
	p := &Pacer{ConfiguredRate: st.ConfiguredRate, RateOverride: st.RateOverride, EffectiveRate: st.EffectiveRate,
		ConfiguredBurst: st.ConfiguredBurst, BurstOverride: st.BurstOverride, EffectiveBurst: st.EffectiveBurst,
		Paused: st.Paused, BacklogSeconds: st.Backlog.Seconds(), Adaptation: Adaptation(st.Adaptation)}
	if st.ThrottledUntil.After(st.Now) {
		t := st.ThrottledUntil
		p.ThrottledUntil = &t
	}
	return p
}

func errText(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
}
