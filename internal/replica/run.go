package replica

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/dispatch"
)

// heartbeat is how often a replica announces itself; LiveWindow is how
// long it counts as live after.
const (
	heartbeat  = 2 * time.Second
	LiveWindow = 10 * time.Second
)

// Replica is a running dispatcher replica: its parts, engine and metrics.
type Replica struct {
	*Parts
	Engine   *dispatch.Engine
	Registry *prometheus.Registry

	closeSink func() error
	ln        net.Listener
}

// New builds the engine and metrics of a replica on opened parts.
func New(p *Parts) (*Replica, error) {
	s, closeSink, err := p.NewSink()
	if err != nil {
		return nil, err
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
	e, err := dispatch.New(p.Config.DispatchConfig(),
		dispatch.Deps{Queue: p.Queue, Pacer: p.Pacer, Sink: s, Priority: prio, Metrics: m, Log: p.Log})
	if err != nil {
		_ = closeSink()
		return nil, fmt.Errorf("replica: engine: %w", err)
	}
	return &Replica{Parts: p, Engine: e, Registry: reg, closeSink: closeSink}, nil
}

// Handler serves /metrics, /healthz (the process is up) and /readyz (the
// queue and the pacer's Redis answer).
func (r *Replica) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(r.Registry, promhttp.HandlerOpts{Registry: r.Registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		err := r.Engine.Ready(ctx)
		if err == nil {
			_, err = r.Pacer.Controls().State(ctx)
		}
		if err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
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
	return errors.Join(err, r.closeSink())
}

// heartbeat announces the replica until ctx ends.
func (r *Replica) heartbeat(ctx context.Context) {
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		actx, cancel := context.WithTimeout(ctx, heartbeat)
		live, err := r.Pacer.Members().Announce(actx, r.ID, "in_flight="+strconv.Itoa(r.Engine.InFlight()), LiveWindow)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.Log.Debug("replica: heartbeat", "err", err)
		}
		if err == nil {
			r.Engine.SetReplicas(len(live))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
