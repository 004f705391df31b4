package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
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
	// TakeAhead returns when n slots of the cluster-wide schedule are the
	// caller's and the last is at most ahead away, and returns that last
	// slot: the request goes on it, from its At until its Deadline, or not
	// at all.
	TakeAhead(ctx context.Context, n int, ahead time.Duration) (pacer.Slot, error)
	// Hold waits until the slot's At, or until ctx ends.
	Hold(ctx context.Context, s pacer.Slot) error
	// Forfeit gives up a slot whose request could not leave before its
	// Deadline: the slot is lost, never spent late.
	Forfeit(s pacer.Slot)
	// Throttle holds the whole cluster back for d.
	Throttle(ctx context.Context, d time.Duration) (time.Time, error)
	// Aside returns an error while this replica must take no slots (its
	// clock is too uncertain while other replicas' are not): it then
	// fetches nothing and hands back the jobs it holds.
	Aside() error
}

var _ Pacer = (*pacer.Pacer)(nil)

// Feedback takes the provider's answers to steer the cluster's effective
// rate (pacer.Feedback). With one, a throttling answer is reported, and
// the schedule holds for its Retry-After once per episode; without, each
// throttling answer holds the cluster with Pacer.Throttle.
type Feedback interface {
	Observe(a pacer.Answer)
}

var _ Feedback = (*pacer.Feedback)(nil)

// Engine drains one replica's share of the queue toward the provider:
// queue → priority → pacer → sink. Run it once; any number of replicas may
// run engines on the same queue and pacer.
type Engine struct {
	cfg     Config
	q       Queue
	pacer   Pacer
	fb      Feedback // nil: throttles hold the cluster each time
	sink    sink.Sender
	ahead   time.Duration // how long before its slot a request goes to a sink that holds (sink.Holder)
	buf     *laneBuffer   // jobs fetched ahead of their slots
	metrics *Metrics
	log     *slog.Logger

	inflight  chan struct{} // semaphore of MaxInFlight
	sends     sync.WaitGroup
	senders   chan sendTask       // to an idle sender (senders.go)
	started   atomic.Int64        // senders started so far
	quit      chan struct{}       // closed when Run ends: idle senders exit
	open      atomic.Int64        // requests open to the provider
	sending   openRequests        // their deliveries, kept alive with the buffer's
	latency   atomic.Int64        // moving average of the provider's answer time, nanoseconds
	replicas  atomic.Int64        // replicas sharing the rate, as last told
	acks      chan queue.Delivery // to the ack loop, when the queue acks in batches
	ackStall  time.Duration       // ackStall; tests change it
	ackLinger time.Duration       // ackLinger; tests change it

	healthMu sync.Mutex
	health   map[string]error     // last error per component, nil when healthy
	failedAt map[string]time.Time // when health's error was last recorded
	// recovered is closed, and replaced, when a component that had failed
	// answers again: loops backing off after a failure retry at once.
	recovered chan struct{}
	sent      sentCounts // requests sent per lane, for the replica's report

	standing atomic.Bool           // standing aside (Pacer.Aside), as last seen
	asideWhy atomic.Pointer[error] // why, while standing

	permits  Permits       // nil without a cluster-wide bound
	tenants  TenantLimits  // nil without tenant limits (tenants.go)
	defers   deferrals     // spacing of deferred jobs per tenant
	deferred atomic.Bool   // the last stocking deferred jobs
	deferSem chan struct{} // bounds the defers in flight
	deferWG  sync.WaitGroup
}

// Deps are what an engine runs on. Metrics and Log may be nil.
type Deps struct {
	Queue    Queue
	Pacer    Pacer
	Sink     sink.Sender
	Priority priority.Config
	Metrics  *Metrics
	Log      *slog.Logger
	// Feedback, when set, is told every answer of the provider.
	Feedback Feedback
	// Permits, when set, cap the requests open to the provider across
	// the cluster (sink.max_in_flight_total): each request holds one.
	Permits Permits
}

// Permits are the cluster's permits to have a request open to the
// provider (pacer.Permits).
type Permits interface {
	// Acquire blocks until this replica holds a permit, and returns the
	// function that gives it back.
	Acquire(ctx context.Context) (release func(), err error)
	// Run keeps the permits held alive until ctx ends, then gives them
	// all back.
	Run(ctx context.Context)
}

var _ Permits = (*pacer.Permits)(nil)

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
		cfg: cfg, q: deps.Queue, pacer: deps.Pacer, fb: deps.Feedback, sink: deps.Sink, permits: deps.Permits,
		buf:     newLaneBuffer(names, sched),
		metrics: deps.Metrics, log: deps.Log,
		inflight: make(chan struct{}, cfg.MaxInFlight),
		senders:  make(chan sendTask),
		ackStall: ackStall, ackLinger: ackLinger,
		quit:     make(chan struct{}),
		health:   map[string]error{},
		deferSem: make(chan struct{}, maxDefersInFlight),
	}
	e.replicas.Store(1)
	if h, ok := deps.Sink.(sink.Holder); ok && h.Holds() {
		e.ahead = holdAhead
	}
	if e.tenants = tenantLimits(deps.Pacer); e.tenants != nil {
		e.tenants.SetTenantDemand(e.buf.tenantDemand)
	}
	return e, nil
}

// Run drains the queue until ctx ends, then shuts down gracefully: it stops
// fetching and taking slots, waits up to ShutdownTimeout for requests in
// flight (then cancels them and hands their jobs back, no attempt spent),
// settles them, and releases the jobs it held unsent back to the queue.
// It returns nil after a clean shutdown.
func (e *Engine) Run(ctx context.Context) error {
	fetchCtx, stopFetch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFetch()

	var bg sync.WaitGroup
	for i := range e.buf.names {
		bg.Go(func() { e.fetchLoop(fetchCtx, i) })
	}
	// Held and in-flight jobs are kept alive until the last is settled.
	aliveCtx, stopAlive := context.WithCancel(context.WithoutCancel(ctx))
	alive := make(chan struct{})
	go func() { defer close(alive); e.keepAlive(aliveCtx) }()
	defer func() { stopAlive(); <-alive }()
	if e.permits != nil {
		permitsDone := make(chan struct{})
		go func() { defer close(permitsDone); e.permits.Run(aliveCtx) }()
		defer func() { stopAlive(); <-permitsDone }()
	}

	ackDone := make(chan struct{})
	if ba, ok := e.q.(queue.BatchAcker); ok {
		e.acks = make(chan queue.Delivery, e.cfg.MaxInFlight)
		go func() { defer close(ackDone); e.ackLoop(ba) }()
	} else {
		close(ackDone)
	}

	// Requests in flight get their own context: shutdown gives them
	// ShutdownTimeout before cancelling.
	sendCtx, cancelSends := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelSends(errShutdown)
	defer close(e.quit)
	e.slotLoop(ctx, sendCtx)

	e.log.Info("dispatch: shutting down", "in_flight", e.open.Load())
	stopFetch()
	bg.Wait()
	e.deferWG.Wait()
	if !waitTimeout(&e.sends, e.cfg.ShutdownTimeout) {
		e.log.Warn("dispatch: shutdown timeout, cancelling requests in flight", "timeout", e.cfg.ShutdownTimeout)
		cancelSends(errShutdown) // the jobs go back unspent: see cancelledByShutdown
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
	var failures backoff
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
		release, err := e.permit(ctx)
		if err != nil {
			<-e.inflight
			if ctx.Err() != nil {
				return
			}
			e.backendError("pacer", err)
			if e.retrySleep(ctx, &failures) != nil {
				return
			}
			continue
		}
		start := e.cfg.Now()
		slot, err := e.pacer.TakeAhead(ctx, 1, e.ahead)
		if err != nil {
			release()
			<-e.inflight
			if !e.slotFailed(ctx, err, &failures) {
				return
			}
			continue
		}
		failures.ok()
		e.setHealthy("pacer")
		d, ok := e.pick(ctx, slot)
		if !ok { // every held job expired, or none may take the slot: it is lost
			if e.tenants != nil {
				e.tenants.Unused(slot)
			}
			release()
			<-e.inflight
			continue
		}
		cost := d.Job().Cost
		if cost > 1 && e.limited(d.Job(), slot) {
			e.sendForTenant(ctx, sendCtx, d, cost-1, release)
			continue
		}
		if cost > 1 {
			if slot, err = e.furtherSlots(ctx, d, cost-1); err != nil {
				release()
				<-e.inflight
				if !e.slotFailed(ctx, err, &failures) {
					return
				}
				continue
			}
			if d.Job().Expired(e.cfg.Now()) { // it expired while it waited: its slots are lost
				e.expire(ctx, d)
				release()
				<-e.inflight
				continue
			}
		}
		e.metrics.slotWait(e.cfg.Now().Sub(start))
		e.startSend(sendTask{ctx: sendCtx, d: d, slot: slot, release: release})
		// Let the send start before the next slot is taken: the sender
		// handed the task waits in its processor's queue while this
		// goroutine runs on, and on a busy host a replica that claims
		// slots already due (a backlog below the cap) would queue sends
		// behind each other until they left past their deadline, each
		// forfeit sending its job round again (3 late forfeits per
		// delivered job at the ceiling before).
		runtime.Gosched()
	}
}

// slotFailed handles a failed TakeAhead: it stands aside when the pacer
// wants this replica to, else records the backend error and backs off. It
// returns false when ctx has ended and the slot loop must return.
func (e *Engine) slotFailed(ctx context.Context, err error, failures *backoff) bool {
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, pacer.ErrAside) {
		e.standAside(ctx) // hands the held jobs back and marks the pacer not ready
		return sleep(ctx, asidePoll) == nil
	}
	e.backendError("pacer", err)
	return e.retrySleep(ctx, failures) == nil
}

// furtherSlots takes the n more slots a job of cost n+1, picked on its
// first, needs, and returns the last, on which it is sent. While it waits,
// the job is in neither the lane buffer nor a request, so it is kept alive
// with the open requests (as sendForTenant does): else its visibility
// timeout could lapse and another replica send it too. When the slots
// cannot be had, the job goes back to the front of its lane and the
// error is returned, wrapped.
func (e *Engine) furtherSlots(ctx context.Context, d queue.Delivery, n int) (pacer.Slot, error) {
	waiting := e.sending.add(d)
	slot, err := e.pacer.TakeAhead(ctx, n, e.ahead)
	e.sending.remove(waiting)
	if err != nil {
		e.putBack(d)
		return pacer.Slot{}, fmt.Errorf("dispatch: %d further slots for job %s: %w", n, d.Job().ID, err)
	}
	return slot, nil
}

// holdAhead is how long before its slot the engine hands a request to a
// sink that holds it at the wire (sink.Holder): the job is picked, the
// request built and a connection taken while the slot is still to come,
// and the request leaves the instant its slot comes, so that none of that
// work (nor the goroutines it passes through on a busy machine) makes it
// late. A job that arrives within holdAhead of a slot goes on a later one.
const holdAhead = 2 * time.Millisecond

// permit acquires a cluster-wide permit when there is a bound, and
// returns the function that gives it back (a no-op without a bound).
func (e *Engine) permit(ctx context.Context) (func(), error) {
	if e.permits == nil {
		return func() {}, nil
	}
	return e.permits.Acquire(ctx)
}

// maxRetryDelay caps the back-off after backend failures: a replica asks
// again at least four times a second, so that it is sending again within
// a quarter of a second of Redis or NATS coming back (a few calls a second
// cost a backend nothing). Loops also retry at once when another loop of
// the replica sees a backend answer again (retrySleep).
const maxRetryDelay = 250 * time.Millisecond

// retryDelay backs off after repeated backend failures: 50ms doubling to
// maxRetryDelay.
func (e *Engine) retryDelay(failures int) time.Duration {
	d := 50 * time.Millisecond
	for i := 1; i < failures && d < maxRetryDelay; i++ {
		d *= 2
	}
	return min(d, maxRetryDelay)
}

// backoff is one loop's state between backend failures: how many in a
// row, and whether its last wait was cut short by a recovery.
type backoff struct {
	failures int
	woken    bool
}

// ok records a call that answered: the next failure starts afresh.
func (b *backoff) ok() { *b = backoff{} }

// retrySleep records a failure and waits out the back-off, or less: it
// returns as soon as any component that had failed answers again (with
// the Redis backend, the pacer's first answer after an outage means the
// queue is back too), unless the wait before was cut short so and the
// loop failed again. A recovery elsewhere says nothing of this loop's
// own failure (one lane's stream gone while another lane fetches): without
// that rule, each answer of the other lane woke it to fail again, tens of
// thousands of calls a second. It returns ctx's error when ctx ends first.
func (e *Engine) retrySleep(ctx context.Context, b *backoff) error {
	b.failures++
	var back chan struct{}
	if !b.woken {
		e.healthMu.Lock()
		if e.recovered == nil {
			e.recovered = make(chan struct{})
		}
		back = e.recovered
		e.healthMu.Unlock()
	}
	b.woken = false
	t := time.NewTimer(e.retryDelay(b.failures))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-back: // nil, never ready, when not listening
		b.woken = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
