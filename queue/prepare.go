package queue

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// NewID returns a new job id: a UUIDv7, so ids sort by creation time.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// Prepare readies jobs for enqueueing under cfg (SetDefaults already
// applied): it normalises each job, validates every one, and only when all
// are valid fills missing ids and stamps EnqueuedAt with now. The error names
// each bad job of a batch of several by index (a *JobError: "job 3:
// payload: required") and matches
// ErrInvalidJob; on error no job's ID or EnqueuedAt is touched. Backends call
// it at the start of Enqueue.
func Prepare(cfg *Config, now time.Time, jobs []*Job) error {
	var errs []error
	for i, j := range jobs {
		if j == nil {
			errs = append(errs, &JobError{Index: i, Err: &FieldError{Field: "job", Reason: "nil"}})
			continue
		}
		j.Normalize(cfg.DefaultLane())
		if err := j.Check(cfg.Limits()); err != nil {
			if len(jobs) == 1 {
				errs = append(errs, err)
			} else {
				errs = append(errs, &JobError{Index: i, Err: err})
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, j := range jobs {
		if j.ID == "" {
			j.ID = NewID()
		}
		j.EnqueuedAt = now
		j.Attempt = 0
	}
	return nil
}
