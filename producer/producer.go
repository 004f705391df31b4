package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
)

// ErrInvalidConfig is wrapped by New's errors about its arguments.
var ErrInvalidConfig = errors.New("producer: invalid config")

// Producer enqueues jobs into one queue, choosing each job's lane by the
// lanes configuration. It is safe for concurrent use when its queue is.
type Producer struct {
	q               queue.Enqueuer
	prio            priority.Config
	lanes           []string
	maxPayloadBytes int
	maxCost         int
	checks          []JobCheck
}

// Option changes how New builds a Producer.
type Option func(*options)

type options struct {
	maxPayloadBytes int
	maxCost         int
	checks          []JobCheck
}

// JobCheck is a check of a job that the queue cannot make itself, such as
// the sink's bounds on the job's own request (sink.Bounds.Check). It
// returns nil for a good job, else its problems, each a *queue.FieldError
// naming the field.
type JobCheck func(*queue.Job) error

// WithJobCheck adds a check that Enqueue, EnqueueBatch and Check run on
// every job before the queue sees it. The dispatcher's sink makes the
// same check again at send, and dead-letters a job that fails it; checking
// at enqueue refuses the job while its producer can still be told. The
// sink's bounds come from the same configuration file the dispatchers
// read: sink.NewBounds(cfg.HTTPSinkConfig()), then WithJobCheck(b.Check).
func WithJobCheck(check JobCheck) Option {
	return func(o *options) {
		if check != nil {
			o.checks = append(o.checks, check)
		}
	}
}

// WithMaxCost tells Check the queue's largest cost (queue.Config.MaxCost).
// Zero, the default, means queue.DefaultMaxCost. Enqueue does not need it:
// the queue applies its own limit.
func WithMaxCost(n int) Option { return func(o *options) { o.maxCost = n } }

// WithMaxPayloadBytes tells Check the queue's payload limit
// (queue.Config.MaxPayloadBytes). Zero, the default, means
// queue.DefaultMaxPayloadBytes. Enqueue does not need it: the queue applies
// its own limit.
func WithMaxPayloadBytes(n int) Option { return func(o *options) { o.maxPayloadBytes = n } }

// New returns a Producer that enqueues into q with the lanes and
// privileged users of prio. prio gets its defaults (priority.Config's
// SetDefaults, on a copy) and is validated; its lanes must be the queue's.
// The errors wrap ErrInvalidConfig (and priority.ErrInvalidConfig when prio
// is wrong).
func New(q queue.Enqueuer, prio priority.Config, opts ...Option) (*Producer, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var errs []error
	if q == nil {
		errs = append(errs, fmt.Errorf("%w: nil queue.Enqueuer", ErrInvalidConfig))
	}
	if o.maxCost < 0 {
		errs = append(errs, fmt.Errorf("%w: max cost must not be negative, got %d", ErrInvalidConfig, o.maxCost))
	}
	if o.maxPayloadBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: max payload bytes must not be negative, got %d", ErrInvalidConfig, o.maxPayloadBytes))
	}
	prio.Lanes = slices.Clone(prio.Lanes)
	prio.PrivilegedUsers = slices.Clone(prio.PrivilegedUsers)
	prio.SetDefaults()
	if err := prio.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("producer: new: %w", err)
	}
	if o.maxPayloadBytes == 0 {
		o.maxPayloadBytes = queue.DefaultMaxPayloadBytes
	}
	return &Producer{q: q, prio: prio, lanes: prio.LaneNames(), maxPayloadBytes: o.maxPayloadBytes,
		maxCost: o.maxCost, checks: o.checks}, nil
}

// Lanes returns the lanes' names, highest priority first.
func (p *Producer) Lanes() []string { return slices.Clone(p.lanes) }

// PrivilegedUsers returns the users whose jobs go to the first lane.
func (p *Producer) PrivilegedUsers() []string { return slices.Clone(p.prio.PrivilegedUsers) }

// route sets the lane of every job that names none.
func (p *Producer) route(jobs []*queue.Job) {
	for _, j := range jobs {
		if j != nil {
			j.Lane = p.prio.Route(j)
		}
	}
}

// Enqueue routes job to its lane and stores it. As with
// queue.Enqueuer.Enqueue, the job is updated in place: Lane, ID when it had
// none, Cost when zero and EnqueuedAt. A job with the idempotency key of one
// stored within the dedup window is not stored again and comes back with
// Duplicate set. An invalid job is not stored and the error, which names
// the field, matches queue.ErrInvalidJob.
func (p *Producer) Enqueue(ctx context.Context, job *queue.Job) (queue.EnqueueResult, error) {
	if err := p.runChecks([]*queue.Job{job}); err != nil {
		return queue.EnqueueResult{}, fmt.Errorf("producer: enqueue: %w", err)
	}
	p.route([]*queue.Job{job})
	res, err := p.q.Enqueue(ctx, job)
	if err != nil {
		return queue.EnqueueResult{}, fmt.Errorf("producer: enqueue: %w", err)
	}
	if len(res) != 1 {
		return queue.EnqueueResult{}, fmt.Errorf("producer: enqueue: the queue gave %d results for one job", len(res))
	}
	return res[0], nil
}

// EnqueueBatch routes and stores jobs, returning one result per job in
// order. Every job is validated before any is stored: when one is invalid,
// nothing is stored and the error (matching queue.ErrInvalidJob) names each
// bad job's index and field. On a backend error (or when ctx ends) some
// jobs may have been stored: the results given with the error are those of
// the first len(results) jobs, in order, each of them stored (or a
// duplicate); the jobs after them may have been stored too. Enqueueing the
// rest again is safe when the jobs carry idempotency keys.
func (p *Producer) EnqueueBatch(ctx context.Context, jobs []*queue.Job) ([]queue.EnqueueResult, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	if err := p.runChecks(jobs); err != nil {
		return nil, fmt.Errorf("producer: enqueue batch: %w", err)
	}
	p.route(jobs)
	res, err := p.q.Enqueue(ctx, jobs...)
	if err != nil {
		return res, fmt.Errorf("producer: enqueue batch: %w", err)
	}
	return res, nil
}

// Check reports what the queue would refuse in job, without storing it or
// changing it: the problems the queue's validation finds (Job.Validate),
// each a *queue.FieldError naming its field, joined, matching
// queue.ErrInvalidJob; nil for a good job. It assumes that the queue has
// the Producer's lanes and the payload limit given with
// WithMaxPayloadBytes. Check lets a caller refuse one bad job of many
// before the others are enqueued.
func (p *Producer) Check(job *queue.Job) error {
	if job == nil {
		return &queue.FieldError{Field: "job", Reason: "nil"}
	}
	j := *job
	j.Lane = p.prio.Route(&j)
	j.Normalize(p.lanes[len(p.lanes)-1])
	errs := []error{j.Check(queue.Limits{Lanes: p.lanes, MaxPayloadBytes: p.maxPayloadBytes, MaxCost: p.maxCost})}
	for _, check := range p.checks {
		errs = append(errs, check(&j))
	}
	return errors.Join(errs...)
}

// runChecks runs the checks of WithJobCheck on every job and returns their
// problems, naming the job's index in a batch as the queue does. A nil job
// is left to the queue.
func (p *Producer) runChecks(jobs []*queue.Job) error {
	if len(p.checks) == 0 {
		return nil
	}
	var errs []error
	for i, j := range jobs {
		if j == nil {
			continue
		}
		for _, check := range p.checks {
			err := check(j)
			switch {
			case err == nil:
			case len(jobs) == 1:
				errs = append(errs, err)
			default:
				errs = append(errs, &queue.JobError{Index: i, Err: err})
			}
		}
	}
	return errors.Join(errs...)
}
