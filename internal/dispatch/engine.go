package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// Fetcher takes jobs out of the queue, lane by lane, as queue.Consumer's
// Fetch does: it blocks until a job is ready in lane, returns up to n, and
// returns early with ctx's error when ctx ends. queue.ErrClosed ends the
// lane's fetching.
type Fetcher interface {
	Fetch(ctx context.Context, lane string, n int) ([]queue.Delivery, error)
}

// Queue is what the engine needs of a queue: Fetch to drain it, and Stats
// for Ready to see that it answers. Any queue.Queue is one. When it also
// implements queue.BatchAcker, delivered jobs are acked in batches.
type Queue interface {
	Fetcher
	queue.Inspector
}

var _ Queue = queue.Queue(nil)

// Pacer is the slice of pacer.Pacer the engine uses.
type Pacer interface {
	// Take returns when n slots of the cluster-wide schedule are the
	// caller's and the last has come, and returns that last slot: the
	// request goes on it, before its Deadline, or not at all.
	Take(ctx context.Context, n int) (pacer.Slot, error)
	// Forfeit gives up a slot whose request could not leave before its
	// Deadline: the slot is lost, never spent late.
	Forfeit(s pacer.Slot)
	// Throttle holds the whole cluster back for d.
	Throttle(ctx context.Context, d time.Duration) (time.Time, error)
}

var _ Pacer = (*pacer.Pacer)(nil)

// Engine drains one replica's share of the queue toward the provider:
// queue → priority → pacer → sink. Run it once; any number of replicas may
// run engines on the same queue and pacer.
type Engine struct {
	cfg     Config
	q       Queue
	pacer   Pacer
	sink    sink.Sender
	buf     *laneBuffer // jobs fetched ahead of their slots
	metrics *Metrics
	log     *slog.Logger

	inflight chan struct{} // semaphore of MaxInFlight
	sends    sync.WaitGroup
	open     atomic.Int64        // requests open to the provider
	latency  atomic.Int64        // moving average of the provider's answer time, nanoseconds
	replicas atomic.Int64        // replicas sharing the rate, as last told
	acks     chan queue.Delivery // to the ack loop, when the queue acks in batches

	healthMu sync.Mutex
	health   map[string]error // last error per component, nil when healthy
}

// Deps are what an engine runs on. Metrics and Log may be nil.
type Deps struct {
	Queue    Queue
	Pacer    Pacer
	Sink     sink.Sender
	Priority priority.Config
	Metrics  *Metrics
	Log      *slog.Logger
}

// New returns an engine for cfg on deps.
func New(cfg Config, deps Deps) (*Engine, error) {
	cfg.SetDefaults()
	errs := []error{cfg.Validate()}
	if deps.Queue == nil || deps.Pacer == nil || deps.Sink == nil {
		errs = append(errs, fmt.Errorf("%w: queue, pacer and sink are required", ErrInvalidConfig))
	}
	sched, err := priority.NewScheduler(deps.Priority)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	names := make([]string, len(deps.Priority.Lanes))
	for i, l := range deps.Priority.Lanes {
		names[i] = l.Name
	}
	e := &Engine{
		cfg: cfg, q: deps.Queue, pacer: deps.Pacer, sink: deps.Sink,
		buf:     newLaneBuffer(names, sched),
		metrics: deps.Metrics, log: deps.Log,
		inflight: make(chan struct{}, cfg.MaxInFlight),
		health:   map[string]error{},
	}
	e.replicas.Store(1)
	return e, nil
}

// Run drains the queue until ctx ends, then shuts down gracefully: it stops
// fetching and taking slots, waits up to ShutdownTimeout for requests in
// flight (then cancels them), settles them, and releases the jobs it held
// unsent back to the queue. It returns nil after a clean shutdown.
func (e *Engine) Run(ctx context.Context) error {
	fetchCtx, stopFetch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFetch()

	var bg sync.WaitGroup
	for i := range e.buf.names {
		bg.Go(func() { e.fetchLoop(fetchCtx, i) })
	}
	bg.Go(func() { e.keepAlive(fetchCtx) })

	ackDone := make(chan struct{})
	if ba, ok := e.q.(queue.BatchAcker); ok {
		e.acks = make(chan queue.Delivery, e.cfg.MaxInFlight)
		go func() { defer close(ackDone); e.ackLoop(ba) }()
	} else {
		close(ackDone)
	}

	// Requests in flight get their own context: shutdown gives them
	// ShutdownTimeout before cancelling.
	sendCtx, cancelSends := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSends()
	e.slotLoop(ctx, sendCtx)

	e.log.Info("dispatch: shutting down", "in_flight", e.open.Load())
	stopFetch()
	bg.Wait()
	if !waitTimeout(&e.sends, e.cfg.ShutdownTimeout) {
		e.log.Warn("dispatch: shutdown timeout, cancelling requests in flight", "timeout", e.cfg.ShutdownTimeout)
		cancelSends()
		e.sends.Wait()
	}
	if e.acks != nil {
		close(e.acks)
	}
	<-ackDone
	e.release(e.buf.drain())
	return nil
}

// slotLoop takes one slot at a time until ctx ends: it waits for room in
// flight and for a job in some lane, then for the slot, and only then
// picks the job, so the job sent is the most urgent one at that moment. A
// job of cost n takes n-1 more slots and is sent on the last.
func (e *Engine) slotLoop(ctx, sendCtx context.Context) {
	failures := 0
	for {
		select {
		case e.inflight <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if !e.buf.waitReady(ctx) {
			<-e.inflight
			return
		}
		start := e.cfg.Now()
		slot, err := e.pacer.Take(ctx, 1)
		if err != nil {
			<-e.inflight
			if ctx.Err() != nil {
				return
			}
			failures++
			e.backendError("pacer", err)
			if sleep(ctx, e.retryDelay(failures)) != nil {
				return
			}
			continue
		}
		failures = 0
		e.setHealthy("pacer")
		d, ok := e.pick(ctx)
		if !ok { // every held job expired: the slot is lost
			<-e.inflight
			continue
		}
		if cost := d.Job().Cost; cost > 1 {
			if slot, err = e.pacer.Take(ctx, cost-1); err != nil {
				e.putBack(d)
				<-e.inflight
				continue
			}
		}
		e.metrics.slotWait(e.cfg.Now().Sub(start))
		e.sends.Add(1)
		go func() {
			defer e.sends.Done()
			defer func() { <-e.inflight }()
			e.send(sendCtx, d, slot)
		}()
	}
}

// maxRetryDelay caps the back-off after backend failures: a replica asks
// again at least twice a second, so that it is sending again within half
// a second of Redis or NATS coming back (a few calls a second cost a
// backend nothing).
const maxRetryDelay = 500 * time.Millisecond

// retryDelay backs off after repeated backend failures: 50ms doubling to
// maxRetryDelay.
func (e *Engine) retryDelay(failures int) time.Duration {
	d := 50 * time.Millisecond
	for i := 1; i < failures && d < maxRetryDelay; i++ {
		d *= 2
	}
	return min(d, maxRetryDelay)
}

// waitTimeout waits for wg up to d; false when d passed first.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
