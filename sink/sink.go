package sink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// Sender delivers one job to the provider.
//
// Send returns nil when the provider took the job (delivered). Otherwise
// its error matches, with errors.Is, exactly one of ErrThrottled (the
// provider asks everyone to slow down; the error is a *ThrottledError with
// the Retry-After), ErrTransient (try again later) or ErrPermanent (will
// never succeed: dead-letter the job with err.Error() as the reason). An
// error matching none of them is to be treated as transient, except
// ErrLate (below). Send must return promptly once ctx ends, and must be
// safe for concurrent use.
//
// Send runs the gate ctx may carry (Gate) as the very last step before it
// writes the request, and writes nothing when the gate refuses: it then
// returns the gate's error (ErrLate, from the dispatch engine, when the
// request's pacer slot has passed). A Sender that never calls Gate sends
// whenever it is called, however late.
type Sender interface {
	Send(ctx context.Context, j *queue.Job) error
}

// SenderFunc adapts a function to the Sender interface.
type SenderFunc func(ctx context.Context, j *queue.Job) error

// Send calls f(ctx, j).
func (f SenderFunc) Send(ctx context.Context, j *queue.Job) error { return f(ctx, j) }

// Middleware wraps a Sender with more behaviour (metrics, logging, a
// circuit breaker).
type Middleware func(Sender) Sender

// Chain wraps s with the middlewares, the first one outermost:
// Chain(s, a, b) sends through a, then b, then s.
func Chain(s Sender, mw ...Middleware) Sender {
	for i := len(mw) - 1; i >= 0; i-- {
		s = mw[i](s)
	}
	return s
}

// Sentinel errors: every error of a Sender matches one of the first three.
var (
	// ErrPermanent is matched by failures that retrying cannot fix: the
	// provider refused the job (4xx other than 408 and 429, an unfollowed
	// redirect). The error's text carries the provider's answer.
	ErrPermanent = errors.New("sink: permanent failure")
	// ErrTransient is matched by failures that may pass on a later try: no
	// answer in time, a connection error, 408, a 5xx other than 503.
	ErrTransient = errors.New("sink: transient failure")
	// ErrThrottled is matched by *ThrottledError: the provider answered
	// 429 or 503 and asks for the traffic to slow down.
	ErrThrottled = errors.New("sink: throttled")
	// ErrInvalidConfig is wrapped by every error of HTTPConfig.Validate.
	ErrInvalidConfig = errors.New("sink: invalid config")
)

// ThrottledError is the provider's request to slow down: a 429 or 503
// answer. It matches ErrThrottled.
type ThrottledError struct {
	// RetryAfter is how long the provider asked to wait (its Retry-After
	// header, in seconds or as a date); zero when it gave none, or gave an
	// unreadable or past one.
	RetryAfter time.Duration
	// Status is the HTTP status: 429 or 503.
	Status int
}

// Error describes the throttling: "sink: throttled: status 429 Too Many
// Requests, retry after 2s".
func (e *ThrottledError) Error() string {
	msg := fmt.Sprintf("sink: throttled: status %d %s", e.Status, http.StatusText(e.Status))
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(", retry after %s", e.RetryAfter)
	}
	return msg
}

// Is makes a ThrottledError match ErrThrottled.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// MaxBodyExcerpt is how many bytes of the provider's answer a StatusError
// keeps.
const MaxBodyExcerpt = 512

// StatusError is a provider's answer that is neither success nor
// throttling. It matches ErrPermanent or ErrTransient according to its
// status (see the package documentation); its text carries the status and
// the start of the body, so that it can serve as a dead-letter reason.
type StatusError struct {
	// Status is the HTTP status.
	Status int
	// Body is the start of the answer's body: at most MaxBodyExcerpt bytes,
	// valid UTF-8, control characters replaced by spaces, trimmed.
	Body string
	// Truncated reports whether the body was longer than Body.
	Truncated bool
	// Location is the redirect target of a 3xx answer (without credentials
	// or query), which the sink does not follow; empty otherwise.
	Location string
}

// Error describes the answer: "sink: permanent failure: status 400 Bad
// Request: {\"error\":\"invalid number\"}".
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%v: status %d %s", e.class(), e.Status, http.StatusText(e.Status))
	if e.Location != "" {
		msg += " (redirect to " + e.Location + " not followed)"
	}
	if e.Body != "" {
		msg += ": " + e.Body
		if e.Truncated {
			msg += "…"
		}
	}
	return msg
}

// Is makes a StatusError match ErrPermanent or ErrTransient by its status.
func (e *StatusError) Is(target error) bool { return target == e.class() }

func (e *StatusError) class() error {
	if e.Status == http.StatusRequestTimeout || e.Status >= 500 {
		return ErrTransient
	}
	return ErrPermanent
}

// LogSafe renders an error of Send for a log line. A provider's answer
// (a *StatusError) is rendered as its status alone, "provider answered 400
// Bad Request", because its body may echo the payload (a phone number, a
// message); any other error as its text, which never carries the payload.
// The error itself, with the answer's excerpt, is for the dead letter.
func LogSafe(err error) string {
	if se, ok := errors.AsType[*StatusError](err); ok {
		return fmt.Sprintf("provider answered %d %s", se.Status, http.StatusText(se.Status))
	}
	return err.Error()
}

// RetryAfter returns how long a throttling answer that err carries (a
// *ThrottledError) asked to wait: zero when err carries none, or the
// provider gave no usable Retry-After.
func RetryAfter(err error) time.Duration {
	if te, ok := errors.AsType[*ThrottledError](err); ok {
		return te.RetryAfter
	}
	return 0
}

// NotSent reports whether err says the request never reached the provider:
// its connection could not be opened (a refused or timed-out dial, a name
// that does not resolve), so no byte of it was written. The request still
// counts as an attempt; it is not counted as sent.
func NotSent(err error) bool {
	oe, ok := errors.AsType[*net.OpError](err)
	return ok && oe.Op == "dial"
}
