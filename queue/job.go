package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Job is one request to deliver to the provider. Only Payload is required
// from a producer; the queue fills ID (when empty), Lane (when empty: the
// last lane, the lowest priority, unless a router chose one), Cost (1 when
// zero) and EnqueuedAt. Attempt is set by the queue on delivery.
//
// On the wire a job is JSON: {"id": "...", "lane": "vip", "user": "alice",
// "key": "idem-123", "not_before": "2026-11-21T10:00:00Z", "expires_at":
// "2026-11-21T10:05:00Z", "cost": 2, "request": {"path": "/sms"},
// "payload": {...}}.
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
	// costs three). Zero means 1; at most Config.MaxCost.
	Cost int `json:"cost,omitempty"`
	// Request holds the parts of the provider's request the job chooses
	// itself (method, URL, path, query, headers), within the bounds of the
	// sink's configuration. Nil means the sink's defaults.
	Request *Request `json:"request,omitempty"`
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

// JobError is what is wrong with one job of a batch of several: Index is
// its place in the batch (from 0), Err its problems (FieldError values,
// joined when there are several). Its text is "job 3: cost: ...".
type JobError struct {
	Index int
	Err   error
}

func (e *JobError) Error() string { return fmt.Sprintf("job %d: %v", e.Index, e.Err) }

// Unwrap returns the job's problems.
func (e *JobError) Unwrap() error { return e.Err }

// DefaultMaxCost is the largest cost of a job when Config.MaxCost is zero.
const DefaultMaxCost = 100

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

// Limits are what a queue accepts of a job: Config's lanes and bounds.
type Limits struct {
	// Lanes are the queue's lanes. A job's lane must be one of them.
	Lanes []string
	// MaxPayloadBytes bounds the payload. Zero means DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// MaxCost bounds the cost. Zero means DefaultMaxCost.
	MaxCost int
}

// Limits returns what the queue configured by c accepts of a job.
func (c *Config) Limits() Limits {
	return Limits{Lanes: c.Lanes, MaxPayloadBytes: c.MaxPayloadBytes, MaxCost: c.MaxCost}
}

// Validate checks a job against the queue's lanes and payload limit, with
// the default largest cost, as Check does.
func (j *Job) Validate(lanes []string, maxPayloadBytes int) error {
	return j.Check(Limits{Lanes: lanes, MaxPayloadBytes: maxPayloadBytes})
}

// Check checks a job against l and returns every problem found, each a
// *FieldError naming its field, joined with errors.Join. It returns nil for
// a valid job. Call Normalize first. Besides the limits, it refuses a null
// payload, a payload, id, key, user or lane that is not valid UTF-8 (JSON
// would store it with U+FFFD in place of the bad bytes, under another id
// than the one the producer holds), and a malformed Request.
func (j *Job) Check(l Limits) error {
	maxPayloadBytes, maxCost := l.MaxPayloadBytes, l.MaxCost
	if maxPayloadBytes <= 0 {
		maxPayloadBytes = DefaultMaxPayloadBytes
	}
	if maxCost <= 0 {
		maxCost = DefaultMaxCost
	}
	lanes := l.Lanes
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
	case !utf8.Valid(j.Payload):
		bad("payload", "not valid UTF-8")
	case isNull(j.Payload):
		bad("payload", "must not be null")
	}
	if !contains(lanes, j.Lane) {
		bad("lane", "unknown lane %q (lanes: %v)", j.Lane, lanes)
	}
	if j.Cost < 1 || j.Cost > maxCost {
		bad("cost", "must be between 1 and %d (queue.max_cost), got %d", maxCost, j.Cost)
	}
	if !j.ExpiresAt.IsZero() && !j.NotBefore.IsZero() && !j.ExpiresAt.After(j.NotBefore) {
		bad("expires_at", "must be after not_before (%s), got %s",
			j.NotBefore.Format(time.RFC3339), j.ExpiresAt.Format(time.RFC3339))
	}
	for _, f := range []struct{ name, v string }{{"id", j.ID}, {"key", j.Key}, {"user", j.User}, {"lane", j.Lane}} {
		switch {
		case len(f.v) > maxIDBytes:
			bad(f.name, "%d bytes, more than the limit of %d", len(f.v), maxIDBytes)
		case !utf8.ValidString(f.v):
			bad(f.name, "not valid UTF-8 (%q)", f.v)
		}
	}
	if j.Request != nil {
		errs = append(errs, j.Request.check()...)
	}
	return errors.Join(errs...)
}

// Expired reports whether the job is past its ExpiresAt at now.
func (j *Job) Expired(now time.Time) bool {
	return !j.ExpiresAt.IsZero() && !now.Before(j.ExpiresAt)
}

// isNull reports whether the JSON text b is null.
func isNull(b json.RawMessage) bool {
	return string(bytes.TrimSpace(b)) == "null"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
