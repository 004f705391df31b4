package dispatch

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
)

// Metrics are a replica's Prometheus metrics. Build them with NewMetrics on
// a registerer of your own (never the global one). A nil *Metrics records
// nothing.
type Metrics struct {
	jobs          *prometheus.CounterVec
	retries       *prometheus.CounterVec
	deadLetters   *prometheus.CounterVec
	wait          *prometheus.HistogramVec
	latency       prometheus.Histogram
	inflight      prometheus.Gauge
	slotWaits     prometheus.Histogram
	late          prometheus.Histogram
	throttles     prometheus.Counter
	backendErrors *prometheus.CounterVec
	ackBatches    prometheus.Counter
}

// Sources are read at scrape time: the queue's counts and the pacer's
// counters and state. Any may be nil.
type Sources struct {
	// Queue gives depth, oldest age and dead letters per lane.
	Queue queue.Inspector
	// PacerStats returns the pacer's counters and its view of the Redis
	// clock: slots granted and forfeited, clock offset and uncertainty.
	PacerStats func() pacer.Stats
	// EffectiveRate returns the cluster's effective rate (the override when
	// set, else the configured rate) and the configured rate.
	EffectiveRate func(ctx context.Context) (effective, configured float64, err error)
	// Feedback returns what this replica's reports of the provider's
	// answers did (pacer.Feedback.Stats): cuts, undos and holds it made.
	Feedback func() pacer.FeedbackStats
}

// NewMetrics registers sluice's metrics on reg.
func NewMetrics(reg prometheus.Registerer, src Sources) (*Metrics, error) {
	m := &Metrics{
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_jobs_total",
			Help: "Jobs handled by this replica, by lane and outcome (delivered, retried, dead_lettered, expired, throttled, released: handed back unspent when shutdown cancelled its request)."},
			[]string{"lane", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_retries_total",
			Help: "Jobs put back into the queue after a transient failure, by lane."}, []string{"lane"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_dead_letters_total",
			Help: "Jobs dead-lettered by this replica, by lane and reason (permanent, expired, max_attempts)."},
			[]string{"lane", "reason"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_wait_seconds",
			Help:    "Time from enqueue to send, by lane: requests that left (not those whose connection never opened).",
			Buckets: prometheus.ExponentialBucketsRange(0.0005, 600, 20)}, []string{"lane"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_provider_latency_seconds",
			Help: "Time the provider took to answer a request, from when it left (after the wait for its slot).", Buckets: prometheus.ExponentialBucketsRange(0.0005, 30, 16)}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_in_flight",
			Help: "Requests open to the provider from this replica."}),
		slotWaits: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_pacer_slot_wait_seconds",
			Help: "Time a ready job waited for its pacer slot.", Buckets: prometheus.ExponentialBucketsRange(0.00005, 10, 16)}),
		late: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_send_lateness_seconds",
			Help:    "How late after its pacer slot a request left: from the slot's time to the sink's last check before writing it.",
			Buckets: prometheus.ExponentialBucketsRange(0.00001, 1, 21)}),
		throttles: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_throttle_events_total",
			Help: "Throttling answers (429, 503) from the provider to this replica; the holds of the schedule they led to are sluice_pacer_holds_total (with pacer.adaptive on, once per episode)."}),
		backendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_backend_errors_total",
			Help: "Failed calls to the queue backend or the pacer's Redis, by component."}, []string{"component"}),
		ackBatches: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_ack_batches_total",
			Help: "Batches of acks sent to the queue backend, each one round trip (one script call on Redis), attempts after a failure included."}),
	}
	cs := []prometheus.Collector{m.jobs, m.retries, m.deadLetters, m.wait, m.latency, m.inflight,
		m.slotWaits, m.late, m.throttles, m.backendErrors, m.ackBatches, &scraped{src: src}}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, c := range []string{"queue", "pacer"} {
		m.backendErrors.WithLabelValues(c)
	}
	return m, nil
}

// Lanes makes the per-lane series exist from the start, at zero.
func (m *Metrics) Lanes(lanes []string) {
	if m == nil {
		return
	}
	for _, l := range lanes {
		for _, o := range []string{outDelivered, outRetried, outDead, outExpired, outThrottled, outReleased} {
			m.jobs.WithLabelValues(l, o)
		}
		m.retries.WithLabelValues(l)
		m.wait.WithLabelValues(l)
		for _, r := range deadReasons {
			m.deadLetters.WithLabelValues(l, r)
		}
	}
}

// deadReasons are the reasons of sluice_dead_letters_total, each exported
// at zero from the start so that increase() sees the first dead letter.
var deadReasons = []string{"permanent", "expired", "max_attempts"}

func (m *Metrics) outcome(lane, outcome string) {
	if m == nil {
		return
	}
	m.jobs.WithLabelValues(lane, outcome).Inc()
	if outcome == outRetried {
		m.retries.WithLabelValues(lane).Inc()
	}
}

func (m *Metrics) dead(lane, reason string) {
	if m != nil {
		m.deadLetters.WithLabelValues(lane, reason).Inc()
	}
}

func (m *Metrics) sent(j *queue.Job, now time.Time) {
	if m != nil && !j.EnqueuedAt.IsZero() {
		m.wait.WithLabelValues(j.Lane).Observe(now.Sub(j.EnqueuedAt).Seconds())
	}
}

func (m *Metrics) providerLatency(d time.Duration) {
	if m != nil {
		m.latency.Observe(d.Seconds())
	}
}

func (m *Metrics) inFlight(delta float64) {
	if m != nil {
		m.inflight.Add(delta)
	}
}

func (m *Metrics) slotWait(d time.Duration) {
	if m != nil {
		m.slotWaits.Observe(d.Seconds())
	}
}

func (m *Metrics) lateness(d time.Duration) {
	if m != nil {
		m.late.Observe(max(d, 0).Seconds())
	}
}

func (m *Metrics) throttle() {
	if m != nil {
		m.throttles.Inc()
	}
}

func (m *Metrics) backendError(component string) {
	if m != nil {
		m.backendErrors.WithLabelValues(component).Inc()
	}
}

func (m *Metrics) ackBatch() {
	if m != nil {
		m.ackBatches.Inc()
	}
}

// scraped collects the metrics read at scrape time from the queue and pacer.
type scraped struct{ src Sources }

var (
	depthDesc = prometheus.NewDesc("sluice_queue_depth",
		"Jobs waiting in the queue, by lane and state (ready, delayed, in_flight).", []string{"lane", "state"}, nil)
	oldestDesc = prometheus.NewDesc("sluice_queue_oldest_age_seconds",
		"Age of the oldest ready job, by lane.", []string{"lane"}, nil)
	deadDesc = prometheus.NewDesc("sluice_queue_dead_letters",
		"Jobs in the dead-letter store.", nil, nil)
	rateDesc = prometheus.NewDesc("sluice_pacer_rate",
		"The pacer's rate for the whole cluster, in slots per second: effective (with an operator's override) and configured.",
		[]string{"kind"}, nil)
	grantedDesc = prometheus.NewDesc("sluice_pacer_slots_granted_total",
		"Pacer slots granted to this replica.", nil, nil)
	ridesDesc = prometheus.NewDesc("sluice_pacer_rides_total",
		"Slots granted to a pacer call sent behind the queue's blocking read (redis backend), which came with the job instead of one round trip after it.", nil, nil)
	forfeitedDesc = prometheus.NewDesc("sluice_pacer_slots_forfeited_total",
		"Pacer slots granted to this replica and given up unspent, by reason: unclaimed (no job took it before its deadline), "+
			"stale (granted by a reply that came after its deadline), late (its request could not leave before its deadline), "+
			"ineligible (every job held was of a tenant over its limit), idle (granted to a ride whose read brought no job).",
		[]string{"reason"}, nil)
	lapsedDesc = prometheus.NewDesc("sluice_pacer_slots_lapsed_total",
		"Slots of the cluster's schedule that passed with no replica asking for them, as this replica's calls found them "+
			"(each is found by one replica: sum over replicas): the cap's unused capacity; while jobs wait, moments when no "+
			"replica asked in time (replicas short of CPU).", nil, nil)
	callsDesc = prometheus.NewDesc("sluice_pacer_calls_total",
		"Redis calls this replica made to reserve slots (reserve.lua, rides included): with sluice_pacer_slots_granted_total, "+
			"the pacer's Redis cost per slot, which grows with the replicas that wait on a full schedule.", nil, nil)
	offsetDesc = prometheus.NewDesc("sluice_pacer_clock_offset_seconds",
		"The Redis clock minus this replica's clock, as the pacer estimates it.", nil, nil)
	uncertaintyDesc = prometheus.NewDesc("sluice_pacer_clock_uncertainty_seconds",
		"The bound on the error of sluice_pacer_clock_offset_seconds: half the round trip it was estimated from.", nil, nil)
	degradedDesc = prometheus.NewDesc("sluice_pacer_degraded",
		"1 while the pacer's Redis is unreachable and this replica paces itself locally (pacer.when_unavailable: local), else 0.", nil, nil)
	degradedEpisodesDesc = prometheus.NewDesc("sluice_pacer_degraded_total",
		"Times this replica began pacing itself locally because the pacer's Redis was unreachable.", nil, nil)
	localGrantedDesc = prometheus.NewDesc("sluice_pacer_local_slots_granted_total",
		"Slots this replica granted itself in local mode, while the pacer's Redis was unreachable.", nil, nil)
	localRateDesc = prometheus.NewDesc("sluice_pacer_local_rate",
		"The rate this replica paces itself at in local mode, in slots per second; 0 when not in local mode or past pacer.max_degraded.", nil, nil)
	replicasDesc = prometheus.NewDesc("sluice_pacer_replicas",
		"Replicas sharing the schedule, as this replica last learnt: the divisor of its local rate.", nil, nil)
	effectiveDesc = prometheus.NewDesc("sluice_pacer_effective_rate",
		"The rate the cluster's schedule runs at, in slots per second: the configured rate or the operator's override, "+
			"lower while the provider throttles (pacer.adaptive).", nil, nil)
	cutsDesc = prometheus.NewDesc("sluice_pacer_rate_cuts_total",
		"Cuts of the cluster's effective rate made by this replica's reports of throttling answers.", nil, nil)
	undosDesc = prometheus.NewDesc("sluice_pacer_rate_undos_total",
		"Cuts undone by this replica's reports because the throttling did not follow the rate.", nil, nil)
	holdsDesc = prometheus.NewDesc("sluice_pacer_holds_total",
		"Holds of the whole schedule for a provider's Retry-After made by this replica's reports (once per episode).", nil, nil)
	reportsDesc = prometheus.NewDesc("sluice_pacer_feedback_reports_total",
		"Redis calls this replica made to report the provider's answers (adapt.lua, pacer.adaptive): one per "+
			"100ms with answers to report, so the cluster's rate of them grows with the replicas, not with the jobs.", nil, nil)
)

// forfeitReasons are the reasons of pacer.Stats.Forfeited, each exported
// from the start.
var forfeitReasons = []string{"unclaimed", "stale", "late", "ineligible", "idle"}

func (s *scraped) Describe(ch chan<- *prometheus.Desc) {
	ch <- depthDesc
	ch <- oldestDesc
	ch <- deadDesc
	ch <- rateDesc
	ch <- grantedDesc
	ch <- ridesDesc
	ch <- forfeitedDesc
	ch <- lapsedDesc
	ch <- callsDesc
	ch <- offsetDesc
	ch <- uncertaintyDesc
	ch <- degradedDesc
	ch <- degradedEpisodesDesc
	ch <- localGrantedDesc
	ch <- localRateDesc
	ch <- replicasDesc
	ch <- effectiveDesc
	ch <- cutsDesc
	ch <- undosDesc
	ch <- holdsDesc
	ch <- reportsDesc
}

func (s *scraped) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s.src.Queue != nil {
		if st, err := s.src.Queue.Stats(ctx); err == nil {
			for _, l := range st.Lanes {
				ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(l.Ready), l.Lane, "ready")
				ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(l.Delayed), l.Lane, "delayed")
				ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(l.InFlight), l.Lane, "in_flight")
				ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, l.OldestAge.Seconds(), l.Lane)
			}
			ch <- prometheus.MustNewConstMetric(deadDesc, prometheus.GaugeValue, float64(st.DeadLetters))
		}
	}
	if s.src.EffectiveRate != nil {
		if eff, conf, err := s.src.EffectiveRate(ctx); err == nil {
			ch <- prometheus.MustNewConstMetric(rateDesc, prometheus.GaugeValue, eff, "effective")
			ch <- prometheus.MustNewConstMetric(rateDesc, prometheus.GaugeValue, conf, "configured")
			ch <- prometheus.MustNewConstMetric(effectiveDesc, prometheus.GaugeValue, eff)
		}
	}
	if s.src.Feedback != nil {
		st := s.src.Feedback()
		ch <- prometheus.MustNewConstMetric(cutsDesc, prometheus.CounterValue, float64(st.Cuts))
		ch <- prometheus.MustNewConstMetric(undosDesc, prometheus.CounterValue, float64(st.Undos))
		ch <- prometheus.MustNewConstMetric(holdsDesc, prometheus.CounterValue, float64(st.Holds))
		ch <- prometheus.MustNewConstMetric(reportsDesc, prometheus.CounterValue, float64(st.Reports))
	}
	if s.src.PacerStats != nil {
		collectPacer(ch, s.src.PacerStats())
	}
}

// collectPacer sends the pacer's counters and clock estimate.
func collectPacer(ch chan<- prometheus.Metric, st pacer.Stats) {
	ch <- prometheus.MustNewConstMetric(grantedDesc, prometheus.CounterValue, float64(st.Granted))
	ch <- prometheus.MustNewConstMetric(ridesDesc, prometheus.CounterValue, float64(st.Rides))
	for _, r := range forfeitReasons {
		ch <- prometheus.MustNewConstMetric(forfeitedDesc, prometheus.CounterValue, float64(st.Forfeited[r]), r)
	}
	ch <- prometheus.MustNewConstMetric(lapsedDesc, prometheus.CounterValue, st.Lapsed)
	ch <- prometheus.MustNewConstMetric(callsDesc, prometheus.CounterValue, float64(st.Calls))
	ch <- prometheus.MustNewConstMetric(offsetDesc, prometheus.GaugeValue, st.ClockOffset.Seconds())
	ch <- prometheus.MustNewConstMetric(uncertaintyDesc, prometheus.GaugeValue, st.ClockUncertainty.Seconds())
	degraded, localRate := 0.0, 0.0
	if st.Degraded {
		degraded = 1
		if !st.DegradedStopped {
			localRate = st.LocalRate
		}
	}
	ch <- prometheus.MustNewConstMetric(degradedDesc, prometheus.GaugeValue, degraded)
	ch <- prometheus.MustNewConstMetric(degradedEpisodesDesc, prometheus.CounterValue, float64(st.DegradedEpisodes))
	ch <- prometheus.MustNewConstMetric(localGrantedDesc, prometheus.CounterValue, float64(st.LocalGranted))
	ch <- prometheus.MustNewConstMetric(localRateDesc, prometheus.GaugeValue, localRate)
	ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(st.Sharers))
}
