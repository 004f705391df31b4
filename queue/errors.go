package queue

import "errors"

// Sentinel errors of the queue contract; backends wrap them so that callers
// can test with errors.Is.
var (
	// ErrInvalidJob is matched by every validation error of a job
	// (each a *FieldError naming the field).
	ErrInvalidJob = errors.New("queue: invalid job")
	// ErrInvalidConfig is wrapped by Config.Validate's errors.
	ErrInvalidConfig = errors.New("queue: invalid config")
	// ErrUnknownLane is returned by Fetch for a lane the queue does not have.
	ErrUnknownLane = errors.New("queue: unknown lane")
	// ErrNotFound is returned when a dead letter to requeue does not exist.
	ErrNotFound = errors.New("queue: not found")
	// ErrSettled is returned when a delivery is acked, retried or
	// dead-lettered a second time, or after its visibility timeout passed and
	// the queue gave it to another consumer.
	ErrSettled = errors.New("queue: delivery already settled or lost")
	// ErrClosed is returned by a queue after Close.
	ErrClosed = errors.New("queue: closed")
)
