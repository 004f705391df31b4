package replica

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/console"
	"github.com/sluicehq/sluice/internal/dispatch"
	"github.com/sluicehq/sluice/pacer"
)

// heartbeat is how often a replica announces itself; LiveWindow is how
// long it counts as live after.
const (
	heartbeat          = 2 * time.Second
	heartbeatImprecise = 250 * time.Millisecond
	LiveWindow         = console.LiveWindow
)

// historyKept is how much of the achieved rate the console charts.
const historyKept = 10 * time.Minute

// Replica is a running dispatcher replica: its parts, engine and metrics.
type Replica struct {
	*Parts
	Engine   *dispatch.Engine
	Registry *prometheus.Registry
	// Feedback reports the provider's answers (nil with pacer.adaptive off).
	Feedback *pacer.Feedback
	// History is the cluster's achieved rate, from the heartbeats, for
	// the console.
	History *console.History

	console   *console.Console
	closeSink func() error
	ln        net.Listener
	operator  operatorWatch
	horizon   horizonWatch
	// beatFailing is whether the last heartbeat failed (heartbeat's
	// goroutine only), so that a failing spell logs once.
	beatFailing bool
}

// New builds the engine and metrics of a replica on opened parts.
func New(p *Parts) (*Replica, error) {
	s, closeSink, err := p.NewSink()
	if err != nil {
		return nil, err
	}
	var fb *pacer.Feedback
	var fbStats func() pacer.FeedbackStats
	if p.Config.Pacer.Adaptive.Enabled {
		fb = p.Pacer.Feedback(p.Log)
		fbStats = fb.Stats
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := dispatch.NewMetrics(reg, dispatch.Sources{
		Queue:      p.Queue,
		PacerStats: p.Pacer.Stats,
		EffectiveRate: func(ctx context.Context) (float64, float64, error) {
			st, err := p.Pacer.Controls().State(ctx)
			return st.EffectiveRate, st.ConfiguredRate, err
		},
		Feedback: fbStats,
	})
	if err != nil {
		_ = closeSink()
		return nil, fmt.Errorf("replica: metrics: %w", err)
	}
	prio := p.Config.PriorityConfig()
	var lanes []string
	for _, l := range prio.Lanes {
		lanes = append(lanes, l.Name)
	}
	m.Lanes(lanes)
	if err := registerPaused(reg, p.Pacer.Controls()); err != nil {
		_ = closeSink()
		return nil, fmt.Errorf("replica: metrics: %w", err)
	}
	deps := dispatch.Deps{Queue: p.Queue, Pacer: p.Pacer, Sink: s, Priority: prio, Metrics: m, Log: p.Log}
	if fb != nil {
		deps.Feedback = fb
	}
	if deps.Permits, err = p.permits(); err != nil {
		_ = closeSink()
		return nil, err
	}
	e, err := dispatch.New(p.Config.DispatchConfig(), deps)
	if err != nil {
		_ = closeSink()
		return nil, fmt.Errorf("replica: engine: %w", err)
	}
	r := &Replica{Parts: p, Engine: e, Registry: reg, Feedback: fb, closeSink: closeSink,
		History: console.NewHistory(historyKept)}
	if r.console, err = r.newConsole(); err != nil {
		_ = closeSink()
		return nil, err
	}
	return r, nil
}

// Handler serves /metrics, /healthz (the process is up), /readyz (the
// queue and the pacer's Redis answer, or the replica paces itself locally
// while Redis is away: see ready) and the operator's console at /console/
// (and / leads there); with metrics.pprof, Go's profiles under
// /debug/pprof/.
func (r *Replica) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/console/", r.console.Handler())
	mux.Handle("GET /{$}", http.RedirectHandler("/console/", http.StatusFound))
	mux.Handle("GET /metrics", promhttp.HandlerFor(r.Registry, promhttp.HandlerOpts{Registry: r.Registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		deg := r.Pacer.Stats().DegradedStats
		engine := func(ctx context.Context) error {
			if deg.Degraded { // the pacer's Redis is away by definition
				return r.Engine.Ready(ctx)
			}
			return r.Engine.Ready(ctx, dispatch.Probe{Component: "pacer", Check: func(ctx context.Context) error {
				_, err := r.Pacer.Controls().State(ctx)
				return err
			}})
		}
		code, body := ready(ctx, engine, deg, r.Pacer.Controls().State)
		if code != http.StatusOK {
			http.Error(w, body, code)
			return
		}
		_, _ = w.Write([]byte(body + "\n"))
	})
	if r.Config.Metrics.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// ready is the answer of /readyz: 200 when the engine is ready (the queue
// answers, no component failing) and the pacer's Redis answers (state).
// While Redis is away and the pacer paces this replica locally
// (pacer.when_unavailable: local), the replica still delivers within the
// cap, so it is ready, and the body says it is degraded; once local mode
// has lasted pacer.max_degraded it sends nothing, and it is not ready, as
// in stop mode. A 503 for a replica that delivers would tell an
// orchestrator (a rollout, a health-gated restart) that every replica is
// broken at once, for an outage of Redis alone that they are riding out;
// the degraded state is for people: in the body, the log and
// sluice_pacer_degraded.
func ready(ctx context.Context, engine func(context.Context) error, deg pacer.DegradedStats,
	state func(context.Context) (pacer.State, error)) (int, string) {
	if err := engine(ctx); err != nil {
		return http.StatusServiceUnavailable, "not ready: " + err.Error()
	}
	switch {
	case deg.Degraded && deg.DegradedStopped:
		return http.StatusServiceUnavailable, "not ready: pacer: Redis unreachable for longer than pacer.max_degraded; sending nothing until it answers"
	case deg.Degraded:
		return http.StatusOK, fmt.Sprintf("ready, degraded: the pacer's Redis is unreachable; this replica paces itself at %.4g/s (1 of %d replicas) since %s",
			deg.LocalRate, deg.Sharers, deg.DegradedSince.UTC().Format(time.RFC3339))
	}
	if _, err := state(ctx); err != nil {
		return http.StatusServiceUnavailable, "not ready: " + err.Error()
	}
	return http.StatusOK, "ready"
}

// Listen opens the metrics listener (unless metrics are off) so that the
// address is known before Run; Run serves on it.
func (r *Replica) Listen() (net.Addr, error) {
	addr := r.Config.Metrics.Listen
	if addr == "" || addr == config.MetricsOff {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("replica: metrics: listen %s: %w", addr, err)
	}
	r.ln = ln
	return ln.Addr(), nil
}

// Run runs the replica until ctx ends, then shuts down gracefully. It
// serves the metrics endpoints when Listen was called.
func (r *Replica) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	var srv *http.Server
	if r.ln != nil {
		srv = &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 5 * time.Second}
		wg.Go(func() {
			if err := srv.Serve(r.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				r.Log.Error("replica: metrics server", "err", err)
			}
		})
	}
	hbCtx, stopHB := context.WithCancel(ctx)
	wg.Go(func() { r.heartbeat(hbCtx) })
	if r.Feedback != nil {
		// Reports go on until the engine has settled its last answers.
		fbCtx, stopFB := context.WithCancel(context.WithoutCancel(ctx))
		defer stopFB()
		fbDone := make(chan struct{})
		go func() { r.Feedback.Run(fbCtx); close(fbDone) }()
		defer func() { stopFB(); <-fbDone }()
	}
	r.Log.Info("sluice: replica running", "replica", r.ID, "queue", r.Config.Queue.Name,
		"backend", r.Config.Queue.Backend, "rate", r.Config.PacerConfig().Rate)
	err := r.Engine.Run(ctx)
	stopHB()
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	wg.Wait()
	// Every request has been answered or cancelled: the others may count
	// one replica fewer at once (their share of the fetches, the divisor of
	// a local rate while Redis is away) rather than for LiveWindow more.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	if lerr := r.Pacer.Members().Leave(lctx, r.ID); lerr != nil {
		r.Log.Debug("replica: leave", "err", lerr)
	}
	cancel()
	return errors.Join(err, r.closeSink())
}

// heartbeat announces the replica until ctx ends, with its report
// (console.Report: requests open, jobs held, sent per lane, the admin
// address), reads the schedule's state to log the operator's changes as
// they take effect, and feeds the console's history.
func (r *Replica) heartbeat(ctx context.Context) {
	m := r.Pacer.Members()
	for {
		r.beat(ctx, m)
		// A replica whose clock is not precise announces more often: each
		// announce is a clock sample, and its peers learn sooner that it
		// stands aside (pacer.ErrAside) and it learns sooner of them.
		next := heartbeat
		if !r.Pacer.Precise() {
			next = heartbeatImprecise
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (r *Replica) beat(ctx context.Context, m *pacer.Members) {
	actx, cancel := context.WithTimeout(ctx, heartbeat)
	defer cancel()
	rep := console.Report{Sending: r.Engine.InFlight(), Held: r.Engine.Held(), Sent: r.Engine.Sent()}
	if r.ln != nil {
		rep.Admin = r.ln.Addr().String()
	}
	live, err := m.Announce(actx, r.ID, rep.String(), LiveWindow)
	if err != nil {
		if ctx.Err() == nil {
			// Counted as the pacer's: an idle replica makes no other call
			// to its Redis, and the alert on backend errors must still fire.
			r.Engine.CountBackendError("pacer")
			if !r.beatFailing {
				r.Log.Warn("replica: heartbeat failed: the pacer's Redis does not answer", "err", err)
			}
			r.beatFailing = true
		}
		return
	}
	if r.beatFailing {
		r.Log.Info("replica: heartbeat answers again")
		r.beatFailing = false
	}
	r.Engine.SetReplicas(len(live))
	var stp *pacer.State
	cfg := r.Pacer.Config()
	rate := cfg.Rate
	if st, err := r.Pacer.Controls().State(actx); err == nil {
		r.operator.see(r.Log, st)
		stp = &st
		if st.RateOverride > 0 { // not the adaptive rate: a cut would warn on each episode
			rate = st.RateOverride
		}
	}
	r.horizon.see(r.Log, rate, cfg.Horizon, len(live))
	r.History.Observe(stp, live)
}
