package natsq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sluicehq/sluice/queue"
)

// Queue is a queue.Queue on NATS JetStream. Build it with New; it is safe
// for concurrent use. See the package documentation for the layout.
type Queue struct {
	js     jetstream.JetStream
	cfg    queue.Config
	n      names
	log    *slog.Logger
	stream jetstream.Stream // the lanes (work queue)
	dead   jetstream.Stream // the dead letters (limits)
	lanes  map[string]jetstream.Consumer
	later  jetstream.Consumer // the delayed subjects

	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	mu     sync.Mutex // guards moving and the wg.Add that starts the mover
	moving bool
	wg     sync.WaitGroup

	acks ackReplies // confirmations of AckBatch's acks

	keepLanes bool // WithKeepLanes: Requeue leaves dead letters of lanes not in cfg.Lanes

	released releases // the bucket of release counts (release.go)
}

var _ queue.Queue = (*Queue)(nil)

// Option changes how New builds a Queue.
type Option func(*options)

type options struct {
	log       *slog.Logger
	replicas  int
	attach    bool
	keepLanes bool
}

// ErrNoQueue is returned by New with WithAttach when a stream or consumer
// of the queue does not exist on the server.
var ErrNoQueue = errors.New("natsq: queue not set up on NATS")

// WithLogger sets the logger of the background mover of delayed jobs.
// The default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithReplicas sets the replica count of the streams and consumers New
// creates (1, 3 or 5 in a cluster). The default is 1. An existing stream
// keeps its replica count.
func WithReplicas(n int) Option { return func(o *options) { o.replicas = n } }

// WithAttach makes New attach to a queue that exists, for a process that
// administers it (an admin command, the ingest API) rather than runs it:
// New looks up the queue's streams and the consumers of cfg's lanes and
// never creates or updates them, so that its configuration cannot change
// the settings the dispatchers gave them (duplicate window, ack wait,
// replicas). The Queue's Config then holds the stream's duplicate window
// and the lane consumers' ack wait as visibility timeout. A stream or lane
// consumer that does not exist is an error matching ErrNoQueue; WithReplicas
// is ignored.
func WithAttach() Option { return func(o *options) { o.attach = true } }

// Bounds of the requests natsq makes.
const (
	// pullWait bounds one blocking pull request; Fetch sends another until
	// its context ends, so a request lost to a server restart costs at
	// most this long.
	pullWait = 5 * time.Second
	// settleTimeout bounds the second half of a two-step settle (the ack
	// after the republish), which runs even if the caller's context ends.
	settleTimeout = 5 * time.Second
	// moverAckWait is the ack wait of the delayed consumer: how long a
	// mover may hold a delayed job it fetched before another may take it.
	moverAckWait = 30 * time.Second
	// headroom is what a stored job may add to its payload (the other
	// fields, JSON quoting), for the check against the server's max_payload.
	headroom = 8 << 10
)

// New opens the queue cfg.Name on js: it creates the queue's streams and
// consumers or brings them up to date with cfg (lanes, visibility timeout,
// dedup window), leaving any other setting an operator changed on an
// existing stream alone. cfg gets its defaults (queue.Config.SetDefaults)
// and is validated first; the errors wrap queue.ErrInvalidConfig. ctx
// bounds the setup only. New never closes the connection behind js; Close
// the Queue, then the connection.
func New(ctx context.Context, js jetstream.JetStream, cfg queue.Config, opts ...Option) (*Queue, error) {
	o := options{log: slog.Default(), replicas: 1}
	for _, opt := range opts {
		opt(&o)
	}
	cfg.Lanes = slices.Clone(cfg.Lanes)
	cfg.SetDefaults()
	if err := validate(js, &cfg, o); err != nil {
		return nil, err
	}
	q := &Queue{js: js, cfg: cfg, n: names{queue: cfg.Name}, log: o.log, lanes: map[string]jetstream.Consumer{}, keepLanes: o.keepLanes}
	setup := func() error { return q.setup(ctx, o.replicas) }
	if o.attach {
		setup = func() error { return q.attach(ctx) }
	}
	if err := setup(); err != nil {
		return nil, err
	}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	return q, nil
}

// validate checks cfg and what natsq adds to it, reporting every problem.
func validate(js jetstream.JetStream, cfg *queue.Config, o options) error {
	errs := []error{cfg.Validate()}
	if js == nil {
		errs = append(errs, fmt.Errorf("%w: natsq: nil jetstream.JetStream", queue.ErrInvalidConfig))
	} else if nc := js.Conn(); nc != nil && nc.MaxPayload() > 0 &&
		int64(cfg.MaxPayloadBytes)+headroom > nc.MaxPayload() {
		errs = append(errs, fmt.Errorf("%w: queue.max_payload_bytes: %d does not fit the NATS server's max_payload of %d bytes (with %d bytes for the other fields)",
			queue.ErrInvalidConfig, cfg.MaxPayloadBytes, nc.MaxPayload(), headroom))
	}
	if o.replicas < 1 || o.replicas > 5 {
		errs = append(errs, fmt.Errorf("%w: natsq: replicas must be between 1 and 5, got %d", queue.ErrInvalidConfig, o.replicas))
	}
	return errors.Join(errs...)
}

// setup creates or updates the streams and consumers.
func (q *Queue) setup(ctx context.Context, replicas int) error {
	var err error
	q.stream, err = ensureStream(ctx, q.js, jetstream.StreamConfig{
		Name:       q.n.stream(),
		Subjects:   []string{q.n.readyAll(), q.n.delayedAll()},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    jetstream.FileStorage,
		Duplicates: q.cfg.DedupWindow,
		Replicas:   replicas,
	})
	if err != nil {
		return err
	}
	q.dead, err = ensureStream(ctx, q.js, jetstream.StreamConfig{
		Name:       q.n.deadStream(),
		Subjects:   []string{q.n.dead()},
		Retention:  jetstream.LimitsPolicy,
		Storage:    jetstream.FileStorage,
		Duplicates: q.cfg.DedupWindow,
		Replicas:   replicas,
	})
	if err != nil {
		return err
	}
	for _, lane := range q.cfg.Lanes {
		c, err := q.ensureConsumer(ctx, q.n.laneConsumer(lane), q.n.ready(lane), q.cfg.VisibilityTimeout, replicas)
		if err != nil {
			return err
		}
		q.lanes[lane] = c
	}
	q.later, err = q.ensureConsumer(ctx, q.n.delayedConsumer(), q.n.delayedAll(), moverAckWait, replicas)
	return err
}

// attach looks up the streams and consumers that setup made, changing
// nothing, and takes the queue's duplicate window and visibility timeout
// from them.
func (q *Queue) attach(ctx context.Context) error {
	var err error
	if q.stream, err = q.lookupStream(ctx, q.n.stream()); err != nil {
		return err
	}
	if q.dead, err = q.lookupStream(ctx, q.n.deadStream()); err != nil {
		return err
	}
	for _, lane := range q.cfg.Lanes {
		c, err := q.lookupConsumer(ctx, q.n.laneConsumer(lane), "lane "+lane)
		if err != nil {
			return err
		}
		q.lanes[lane] = c
	}
	if q.later, err = q.lookupConsumer(ctx, q.n.delayedConsumer(), "delayed jobs"); err != nil {
		return err
	}
	q.cfg.DedupWindow = q.stream.CachedInfo().Config.Duplicates
	if ack := q.lanes[q.cfg.Lanes[0]].CachedInfo().Config.AckWait; ack > 0 {
		q.cfg.VisibilityTimeout = ack
	}
	return nil
}

// lookupStream returns the stream name, which must exist.
func (q *Queue) lookupStream(ctx context.Context, name string) (jetstream.Stream, error) {
	s, err := q.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: no queue %s (stream %s not found): start a dispatcher first", ErrNoQueue, q.cfg.Name, name)
	}
	if err != nil {
		return nil, fmt.Errorf("natsq: stream %s: %w", name, err)
	}
	return s, nil
}

// lookupConsumer returns the consumer name of the queue's stream, which
// must exist; what names what it is for.
func (q *Queue) lookupConsumer(ctx context.Context, name, what string) (jetstream.Consumer, error) {
	c, err := q.stream.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("%w: queue %s has no %s (consumer %s of stream %s not found): queue.lanes must be the dispatchers', and a dispatcher must have started",
			ErrNoQueue, q.cfg.Name, what, name, q.n.stream())
	}
	if err != nil {
		return nil, fmt.Errorf("natsq: consumer %s of %s: %w", name, q.n.stream(), err)
	}
	return c, nil
}

// ensureStream creates the stream want, or updates the subjects and dedup
// window of the existing one, keeping its other settings.
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	for range 2 { // a second round when another replica created it first
		s, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s, err = js.CreateStream(ctx, want)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("natsq: stream %s: %w", want.Name, err)
		}
		cur := s.CachedInfo().Config
		if cur.Retention != want.Retention {
			return nil, fmt.Errorf("natsq: stream %s: has retention %s, want %s", want.Name, cur.Retention, want.Retention)
		}
		if slices.Equal(cur.Subjects, want.Subjects) && cur.Duplicates == want.Duplicates {
			return s, nil
		}
		cur.Subjects, cur.Duplicates = want.Subjects, want.Duplicates
		if s, err = js.UpdateStream(ctx, cur); err != nil {
			return nil, fmt.Errorf("natsq: update stream %s: %w", want.Name, err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("natsq: stream %s: created and gone again", want.Name)
}

// ensureConsumer creates or updates a durable pull consumer with explicit
// acks. MaxDeliver is unlimited: natsq counts attempts itself, so that a
// job out of attempts is dead-lettered rather than left in the stream.
// MaxAckPending is unlimited too: the dispatcher bounds its in-flight jobs.
func (q *Queue) ensureConsumer(ctx context.Context, name, filter string, ackWait time.Duration, replicas int) (jetstream.Consumer, error) {
	c, err := q.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       name,
		FilterSubject: filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    -1,
		MaxAckPending: -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Replicas:      replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("natsq: consumer %s of %s: %w", name, q.n.stream(), err)
	}
	return c, nil
}

// Config returns the queue's configuration with defaults filled in.
func (q *Queue) Config() queue.Config { return q.cfg }

// Close stops the queue's background work and makes blocked Fetch calls
// return queue.ErrClosed; later calls return queue.ErrClosed. It leaves the
// streams, the consumers and the connection alone. Deliveries already
// fetched can still be settled. Close always returns nil.
func (q *Queue) Close() error {
	q.mu.Lock()
	q.cancel()
	q.mu.Unlock()
	q.wg.Wait()
	q.acks.close()
	return nil
}

// closed reports whether Close was called.
func (q *Queue) closed() bool { return q.ctx.Err() != nil }

// bind returns a context that ends with ctx or at Close.
func (q *Queue) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(q.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// detach returns a context for the last step of a settle that must not be
// cut short by the caller's context ending.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
}
