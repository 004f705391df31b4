// Package demo runs sluice end to end inside one process, with nothing to
// install: an embedded Redis (miniredis) or NATS server, the mock provider,
// two dispatcher replicas and a producer that bursts jobs into a capped
// queue. It prints a live view once a second, then the provider's report.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/internal/replica"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
)

// Options shape a demo run. Zero values mean the documented default.
type Options struct {
	Backend    string        // "redis" (miniredis) or "nats" (embedded JetStream). Zero means redis.
	Jobs       int           // jobs in the burst. Zero means 2000.
	Rate       float64       // the cap, requests/s. Zero means 100.
	Privileged float64       // share of jobs from a privileged user. Zero means 0.1.
	Replicas   int           // dispatcher replicas. Zero means 2.
	Chart      string        // where to write the chart. Zero means sluice-demo.svg in the temp dir.
	Timeout    time.Duration // give up after. Zero means 2 minutes, or 3 × Jobs ÷ Rate + 30s when longer.
	Out        io.Writer     // the live view and report. Zero means os.Stdout.
	Log        *slog.Logger  // the replicas' logs. Zero means warnings to os.Stderr.
}

func (o *Options) setDefaults() {
	if o.Backend == "" {
		o.Backend = "redis"
	}
	o.Jobs = cmp(o.Jobs, 2000)
	o.Replicas = cmp(o.Replicas, 2)
	if o.Rate == 0 {
		o.Rate = 100
	}
	if o.Privileged == 0 {
		o.Privileged = 0.1
	}
	if o.Chart == "" {
		o.Chart = filepath.Join(os.TempDir(), "sluice-demo.svg")
	}
	if o.Timeout == 0 {
		o.Timeout = max(2*time.Minute, time.Duration(3*float64(o.Jobs)/o.Rate*float64(time.Second))+30*time.Second)
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
}

func cmp(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Result is what a demo run measured.
type Result struct {
	Report mockprovider.Report
	Chart  string // path of the chart written
}

// Run runs the demo until every job is delivered, ctx ends or the timeout
// passes, and returns the provider's report.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.Check(""); err != nil {
		return Result{}, fmt.Errorf("demo: %w", err)
	}
	o.setDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	env, err := startEnv(ctx, o)
	if err != nil {
		return Result{}, err
	}
	defer env.close()
	fmt.Fprintf(o.Out, "sluice demo: %d jobs (%.0f%% from privileged user alice) burst into a %g/s cap, %d replicas, %s queue\n",
		o.Jobs, 100*o.Privileged, o.Rate, o.Replicas, o.Backend)
	fmt.Fprintf(o.Out, "provider %s · embedded %s\n\n", env.prov.URL(), env.what)

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, o.Replicas)
	for i := range o.Replicas {
		r, err := env.replica(ctx, i)
		if err != nil {
			stop()
			wg.Wait()
			return Result{}, err
		}
		wg.Go(func() { errs[i] = r.Run(runCtx) })
	}
	if err := env.burst(ctx); err != nil {
		stop()
		wg.Wait()
		return Result{}, err
	}
	err = env.watch(ctx)
	stop()
	wg.Wait()
	if err := errors.Join(append(errs, err)...); err != nil {
		return Result{}, err
	}
	return env.finish()
}

// env is one demo's embedded servers, configuration and producer.
type env struct {
	o     Options
	what  string
	mini  *miniredis.Miniredis
	rdb   *redis.Client
	nsrv  *server.Server
	nc    *nats.Conn
	prov  *mockprovider.Provider
	cfg   *config.Config
	parts []*replica.Parts
	start time.Time
}

func startEnv(ctx context.Context, o Options) (*env, error) {
	e := &env{o: o}
	var err error
	if e.mini, err = miniredis.Run(); err != nil {
		return nil, fmt.Errorf("demo: embedded redis: %w", err)
	}
	e.rdb = redis.NewClient(&redis.Options{Addr: e.mini.Addr()})
	e.what = "Redis (miniredis) " + e.mini.Addr()
	if o.Backend == "nats" {
		if err := e.startNATS(); err != nil {
			e.close()
			return nil, err
		}
	}
	if e.prov, err = mockprovider.New(mockprovider.Config{Listen: "127.0.0.1:0", Cap: o.Rate}); err == nil {
		err = e.prov.Start(ctx)
	}
	if err != nil {
		e.close()
		return nil, fmt.Errorf("demo: provider: %w", err)
	}
	flags := map[string]string{
		"queue.name": "demo", "queue.backend": o.Backend, "queue.lanes": "vip:8,default:2",
		"queue.privileged_users": "alice", "pacer.rate": fmt.Sprint(o.Rate),
		"redis.url": "redis://" + e.mini.Addr() + "/0", "sink.url": e.prov.URL(), "metrics.listen": config.MetricsOff,
	}
	if e.nsrv != nil {
		flags["nats.url"] = e.nsrv.ClientURL()
	}
	if e.cfg, err = config.Load("", nil, flags); err != nil {
		e.close()
		return nil, fmt.Errorf("demo: config: %w", err)
	}
	return e, nil
}

func (e *env) startNATS() error {
	dir, err := os.MkdirTemp("", "sluice-demo-nats-")
	if err != nil {
		return fmt.Errorf("demo: nats store: %w", err)
	}
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true}
	if e.nsrv, err = server.NewServer(opts); err != nil {
		return fmt.Errorf("demo: embedded nats: %w", err)
	}
	go e.nsrv.Start()
	if !e.nsrv.ReadyForConnections(10 * time.Second) {
		return fmt.Errorf("demo: embedded nats not ready after 10s")
	}
	if e.nc, err = nats.Connect(e.nsrv.ClientURL()); err != nil {
		return fmt.Errorf("demo: nats connect: %w", err)
	}
	e.what += " · NATS JetStream " + e.nsrv.ClientURL()
	return nil
}

// replica opens replica i on the embedded servers.
func (e *env) replica(ctx context.Context, i int) (*replica.Replica, error) {
	p, err := replica.Open(ctx, e.cfg, replica.Options{ID: fmt.Sprintf("replica-%d", i+1), Redis: e.rdb, NATS: e.nc, Log: e.o.Log})
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	e.parts = append(e.parts, p)
	return replica.New(p)
}

// burst enqueues every job at once, a share of them from alice.
func (e *env) burst(ctx context.Context) error {
	prod, err := producer.New(e.parts[0].Queue, e.cfg.PriorityConfig())
	if err != nil {
		return fmt.Errorf("demo: producer: %w", err)
	}
	every := max(1, int(1/e.o.Privileged+0.5))
	jobs := make([]*queue.Job, e.o.Jobs)
	for i := range jobs {
		user := "bob"
		if i%every == every-1 {
			user = "alice"
		}
		payload, _ := json.Marshal(map[string]string{"to": fmt.Sprintf("+1555%07d", i), "text": "your code is 123456"})
		jobs[i] = &queue.Job{User: user, Payload: payload}
	}
	e.start = time.Now()
	if _, err := prod.EnqueueBatch(ctx, jobs); err != nil {
		return fmt.Errorf("demo: enqueue: %w", err)
	}
	return nil
}

func (e *env) close() {
	for _, p := range e.parts {
		_ = p.Close()
	}
	if e.prov != nil {
		_ = e.prov.Close()
	}
	if e.nc != nil {
		e.nc.Close()
	}
	if e.nsrv != nil {
		e.nsrv.Shutdown()
		e.nsrv.WaitForShutdown()
		_ = os.RemoveAll(e.nsrv.StoreDir())
	}
	if e.rdb != nil {
		_ = e.rdb.Close()
	}
	if e.mini != nil {
		e.mini.Close()
	}
}
