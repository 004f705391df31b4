package queue

import (
	"context"
	"errors"
)

// State is where a job is in the queue.
type State string

// The states of a job.
const (
	// StateWaiting: in its lane, due now, not fetched yet.
	StateWaiting State = "waiting"
	// StateDelayed: due later (a future not_before, or a retry's backoff).
	StateDelayed State = "delayed"
	// StateInFlight: fetched by a dispatcher and not settled yet (being
	// paced or sent, or lost with a replica and due again after the
	// visibility timeout).
	StateInFlight State = "in_flight"
	// StateDead: in the dead-letter store.
	StateDead State = "dead"
	// StateUnknown: not in the queue: delivered (acked jobs are not kept),
	// deleted, never enqueued, or moving between two states at the very
	// moment it was looked for.
	StateUnknown State = "unknown"
)

// Location is where a job is, found by Locator.Locate.
type Location struct {
	// State is the job's state; StateUnknown when it was not found.
	State State
	// Job is the job as stored (Attempt: the attempts made before this
	// one), nil when unknown.
	Job *Job
	// Reason is why a dead job was dead-lettered; empty otherwise.
	Reason string
}

// ErrInFlight is returned by Canceler.Cancel for a job a dispatcher holds:
// it may be on its way to the provider and cannot be taken back.
var ErrInFlight = errors.New("queue: job in flight")

// Locator is implemented by queues that can find a job by its id, for the
// ingest API's lookup. It is optional: the Queue contract does not need it.
type Locator interface {
	// Locate returns where the job with the given id is. A job not found
	// is StateUnknown with a nil error; an error is the backend's. A job
	// that moves between two states while Locate looks (promoted, retried,
	// dead-lettered at that instant) may be reported unknown: ask again.
	// Its cost grows with the queue's backlog (backends keep no index by
	// id), so it is for lookups by hand or by an API client, not for a hot
	// path.
	Locate(ctx context.Context, id string) (Location, error)
}

// Canceler is implemented by queues that can take a job back before it is
// sent, for the ingest API's DELETE. It is optional.
type Canceler interface {
	// Cancel removes the job with the given id when it is waiting, delayed
	// or dead, and returns the state it was in. A job in flight is left
	// alone and gives an error wrapping ErrInFlight; a job not found gives
	// one wrapping ErrNotFound. The job's idempotency key stays held for
	// the rest of the dedup window: enqueueing it again is a duplicate.
	Cancel(ctx context.Context, id string) (State, error)
}
