package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Job is one request to deliver to the provider. Only Payload is required
// from a producer; the queue fills ID (when empty), Lane (when empty: the
// last lane, the lowest priority, unless a router chose one), Cost (1 when
// zero) and EnqueuedAt. Attempt is set by the queue on delivery.
//
// On the wire a job is JSON: {"id": "...", "lane": "vip", "user": "alice",
// "key": "idem-123", "not_before": "2026-11-21T10:00:00Z", "expires_at":
// "2026-11-21T10:05:00Z", "cost": 2, "payload": {...}}.
type Job struct {
	// ID identifies the job; generated at enqueue when empty, kept when given.
	ID string `json:"id,omitempty"`
	// Lane is the priority lane the job waits in.
	Lane string `json:"lane,omitempty"`
	// User is the producer's user, used to route privileged users' jobs.
	User string `json:"user,omitempty"`
	// Key is the idempotency key: enqueueing the same key twice within the
	// dedup window stores the job once. The sink passes it to the provider.
	Key string `json:"key,omitempty"`
	// NotBefore holds the job back until that time. Zero means now.
	NotBefore time.Time `json:"not_before,omitzero"`
	// ExpiresAt is when the job becomes worthless (a stale one-time
	// password): past it, the job is dead-lettered as expired before it
	// spends a slot. Zero means never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Cost is how many pacer slots the job spends (an SMS of three segments
	// costs three). Zero means 1.
	Cost int `json:"cost,omitempty"`
	// Attempt is the number of this delivery, 1 on the first. Set by the queue.
	Attempt int `json:"attempt,omitempty"`
	// EnqueuedAt is when the job entered the queue. Set by the queue.
	EnqueuedAt time.Time `json:"enqueued_at,omitzero"`
	// LastError is the reason given with the last retry or dead-lettering.
	LastError string `json:"last_error,omitempty"`
	// Payload is the request body sent to the provider, any valid JSON.
	Payload json.RawMessage `json:"payload"`
}

// DefaultMaxPayloadBytes is the payload size limit when Config.MaxPayloadBytes is zero.
const DefaultMaxPayloadBytes = 64 << 10

// maxIDBytes bounds ids, keys, users and lane names.
const maxIDBytes = 256

// FieldError names the field of a job that is wrong and why.
type FieldError struct {
	Field  string // the JSON name of the field: "payload", "lane", "cost"...
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Is makes every FieldError match ErrInvalidJob.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidJob }

// Normalize fills the defaults of a job about to be enqueued: Cost 1 when
// zero and Lane defaultLane when empty. It does not generate the ID.
func (j *Job) Normalize(defaultLane string) {
	if j.Cost == 0 {
		j.Cost = 1
	}
	if j.Lane == "" {
		j.Lane = defaultLane
	}
}

// Validate checks a job against the queue's lanes and payload limit and
// returns every problem found, each a *FieldError naming its field, joined
// with errors.Join. It returns nil for a valid job. Call Normalize first.
func (j *Job) Validate(lanes []string, maxPayloadBytes int) error {
	if maxPayloadBytes <= 0 {
		maxPayloadBytes = DefaultMaxPayloadBytes
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(j.Payload) == 0:
		bad("payload", "required")
	case len(j.Payload) > maxPayloadBytes:
		bad("payload", "%d bytes, more than the limit of %d", len(j.Payload), maxPayloadBytes)
	case !json.Valid(j.Payload):
		bad("payload", "not valid JSON")
	}
	if !contains(lanes, j.Lane) {
		bad("lane", "unknown lane %q (lanes: %v)", j.Lane, lanes)
	}
	if j.Cost < 1 {
		bad("cost", "must be at least 1, got %d", j.Cost)
	}
	if !j.ExpiresAt.IsZero() && !j.NotBefore.IsZero() && !j.ExpiresAt.After(j.NotBefore) {
		bad("expires_at", "must be after not_before (%s), got %s",
			j.NotBefore.Format(time.RFC3339), j.ExpiresAt.Format(time.RFC3339))
	}
	for _, f := range []struct{ name, v string }{{"id", j.ID}, {"key", j.Key}, {"user", j.User}} {
		if len(f.v) > maxIDBytes {
			bad(f.name, "%d bytes, more than the limit of %d", len(f.v), maxIDBytes)
		}
	}
	return errors.Join(errs...)
}

// Expired reports whether the job is past its ExpiresAt at now.
func (j *Job) Expired(now time.Time) bool {
	return !j.ExpiresAt.IsZero() && !now.Before(j.ExpiresAt)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
