package queue

import (
	"context"
	"time"
)

// Queue is a durable queue of jobs with priority lanes. Both backends
// (queue/redisq, queue/natsq) implement it and pass the conformance suite in
// queue/queuetest. A Queue is safe for concurrent use.
type Queue interface {
	Enqueuer
	Consumer
	DeadLetters
	Inspector
	// Close releases what the queue opened itself (never the client or
	// connection it was given). Blocked Fetch calls return ErrClosed.
	Close() error
}

// EnqueueResult is the outcome of enqueueing one job.
type EnqueueResult struct {
	// ID is the id of the stored job. For a duplicate it is the id of the job
	// first stored under the same key where the backend knows it
	// (queuetest.Features.OriginalIDOnDuplicate), else the id this call gave.
	ID string
	// Duplicate is true when a job with the same idempotency key was stored
	// within the dedup window, so this one was not stored again.
	Duplicate bool
}

// Enqueuer puts jobs into the queue.
type Enqueuer interface {
	// Enqueue normalises (Job.Normalize with Config.DefaultLane), validates
	// and stores jobs, returning one result per job in order. It generates an
	// ID for each job without one and sets EnqueuedAt (the given jobs are
	// updated in place). Validation covers every job before anything is
	// stored: if any job is invalid, nothing is stored and the error (matching
	// ErrInvalidJob) names each bad job's index and field. A job with
	// NotBefore in the future is not delivered before that time.
	//
	// Each job is stored atomically with its dedup key. A batch is not one
	// transaction: on a backend error some jobs may be stored; enqueueing the
	// same batch again with idempotency keys is then safe.
	Enqueue(ctx context.Context, jobs ...*Job) ([]EnqueueResult, error)
}

// Consumer takes jobs out of the queue, lane by lane.
type Consumer interface {
	// Fetch blocks until at least one job is ready in lane, then returns up to
	// n of them, oldest first (FIFO within the lane). It returns early with
	// ctx.Err() when ctx ends and nothing was fetched; it never polls in a
	// busy loop. Each returned Delivery must be settled (Ack, Retry,
	// DeadLetter) or kept alive with Extend before the visibility timeout,
	// else the job is delivered again, possibly to another consumer. A job
	// whose delivery count would exceed MaxAttempts is dead-lettered by the
	// queue with reason "visibility timeout expired on every attempt" (or the
	// like) instead of being returned. Unknown lanes get ErrUnknownLane.
	Fetch(ctx context.Context, lane string, n int) ([]Delivery, error)
}

// Delivery is one fetched job, to be settled exactly once.
type Delivery interface {
	// Job is the delivered job, with Attempt set (1 on the first delivery;
	// deliveries after a visibility timeout count too).
	Job() *Job
	// Ack removes the job from the queue for good: it was delivered.
	Ack(ctx context.Context) error
	// Retry puts the job back into its lane, due after delay, with Attempt
	// one higher on its next delivery and LastError set to reason. When this
	// was the job's last attempt (Attempt >= MaxAttempts) the job is
	// dead-lettered with reason instead and deadLettered is true.
	Retry(ctx context.Context, delay time.Duration, reason string) (deadLettered bool, err error)
	// DeadLetter moves the job to the dead-letter store with reason.
	DeadLetter(ctx context.Context, reason string) error
	// Extend restarts the visibility timeout: the job stays with this
	// consumer while it waits (for a pacer slot, say).
	Extend(ctx context.Context) error
}

// DeadLetter is a job that left the queue without being delivered.
type DeadLetter struct {
	Job    Job       // the job as it was last delivered, LastError set to Reason
	Reason string    // why: the provider's answer, "expired", "max attempts: ..."
	At     time.Time // when it was dead-lettered
}

// DeadLetters lists and requeues dead-lettered jobs.
type DeadLetters interface {
	// ListDead returns up to limit dead letters, oldest first.
	ListDead(ctx context.Context, limit int) ([]DeadLetter, error)
	// Requeue puts the dead letters with the given job ids back into their
	// lanes, due now, with their attempt count reset, and removes them from
	// the dead-letter store. With no ids it requeues every dead letter. It
	// returns how many were requeued; an id that is not a dead letter gives
	// an error wrapping ErrNotFound after the others are requeued.
	Requeue(ctx context.Context, ids ...string) (int, error)
}

// LaneStats describes one lane at a moment.
type LaneStats struct {
	Lane      string
	Ready     int64         // waiting to be fetched, due now
	Delayed   int64         // due later (retry backoff, not-before)
	InFlight  int64         // fetched and not yet settled
	OldestAge time.Duration // age of the oldest ready job (0 when none)
}

// Stats describes the queue at a moment.
type Stats struct {
	Lanes       []LaneStats // in lane order
	DeadLetters int64
}

// Inspector reads the queue's counts, for metrics and `dispatcher status`.
type Inspector interface {
	Stats(ctx context.Context) (Stats, error)
}

// BatchAcker is implemented by queues that can acknowledge many deliveries
// in one call. The dispatch engine uses it when present: at high rates
// acks are then one round trip per batch instead of per job.
type BatchAcker interface {
	// AckBatch acks every delivery (each fetched from this queue) and
	// returns one error per delivery, in order: nil when acked, one
	// wrapping ErrSettled when the delivery was no longer this consumer's.
	AckBatch(ctx context.Context, ds []Delivery) []error
}

// Releaser is implemented by deliveries that can give their job back to
// the queue at once, unsent, for another consumer to take (at shutdown).
// Without it, an unsettled job comes back after the visibility timeout.
type Releaser interface {
	// Release gives the job back. Where the backend can, the release does
	// not count as an attempt.
	Release(ctx context.Context) error
}
