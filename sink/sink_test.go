package sink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

func TestThrottledError(t *testing.T) {
	var err error = &ThrottledError{RetryAfter: 2 * time.Second, Status: 429}
	err = fmt.Errorf("dispatch: job 1: %w", err)
	if !errors.Is(err, ErrThrottled) {
		t.Error("errors.Is(err, ErrThrottled): got false, want true")
	}
	if errors.Is(err, ErrTransient) || errors.Is(err, ErrPermanent) {
		t.Error("a ThrottledError matches ErrTransient or ErrPermanent, want neither")
	}
	te, ok := errors.AsType[*ThrottledError](err)
	if !ok || te.RetryAfter != 2*time.Second {
		t.Errorf("errors.As: got %v %v, want RetryAfter 2s", te, ok)
	}
	if got, want := te.Error(), "sink: throttled: status 429 Too Many Requests, retry after 2s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStatusErrorClass(t *testing.T) {
	tests := []struct {
		status int
		want   error
	}{
		{300, ErrPermanent}, {302, ErrPermanent}, {400, ErrPermanent}, {404, ErrPermanent},
		{408, ErrTransient}, {418, ErrPermanent}, {500, ErrTransient}, {502, ErrTransient}, {504, ErrTransient},
	}
	for _, tt := range tests {
		err := &StatusError{Status: tt.status}
		if !errors.Is(err, tt.want) {
			t.Errorf("status %d: got %v, want it to match %v", tt.status, err, tt.want)
		}
		if got := class(err); strings.HasPrefix(got, "several") {
			t.Errorf("status %d: got %s", tt.status, got)
		}
	}
}

func TestChain(t *testing.T) {
	var trace []string
	mw := func(name string) Middleware {
		return func(next Sender) Sender {
			return SenderFunc(func(ctx context.Context, j *queue.Job) error {
				trace = append(trace, name)
				return next.Send(ctx, j)
			})
		}
	}
	inner := SenderFunc(func(context.Context, *queue.Job) error {
		trace = append(trace, "sink")
		return ErrTransient
	})
	err := Chain(inner, mw("a"), mw("b")).Send(context.Background(), &queue.Job{})
	if !errors.Is(err, ErrTransient) {
		t.Errorf("got %v, want the inner sender's error", err)
	}
	if got := strings.Join(trace, ","); got != "a,b,sink" {
		t.Errorf("got %q, want %q", got, "a,b,sink")
	}
}

// Logs never carry the provider's answer body, which may echo the payload.
func TestLogSafe(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("wrapped: %w", &StatusError{Status: 400, Body: `{"error":"invalid number +15550100"}`}), "provider answered 400 Bad Request"},
		{&StatusError{Status: 502, Body: "+15550100"}, "provider answered 502 Bad Gateway"},
		{&ThrottledError{Status: 429, RetryAfter: time.Second}, "sink: throttled: status 429 Too Many Requests, retry after 1s"},
		{errors.New("dial tcp: refused"), "dial tcp: refused"},
	} {
		if got := LogSafe(tt.err); got != tt.want {
			t.Errorf("LogSafe(%q) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want time.Duration
	}{
		{fmt.Errorf("x: %w", &ThrottledError{Status: 429, RetryAfter: 2 * time.Second}), 2 * time.Second},
		{&ThrottledError{Status: 503}, 0},
		{&StatusError{Status: 500}, 0},
		{ErrThrottled, 0},
	} {
		if got := RetryAfter(tt.err); got != tt.want {
			t.Errorf("RetryAfter(%q) = %s, want %s", tt.err, got, tt.want)
		}
	}
}

func TestNotSentOnlyForConnectionsNeverOpened(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: context.DeadlineExceeded}, true},
		{fmt.Errorf("%w: POST http://x: %w", ErrTransient, &net.OpError{Op: "dial", Err: context.DeadlineExceeded}), true},
		{&net.OpError{Op: "read", Err: context.DeadlineExceeded}, false},
		{ErrTransient, false},
		{nil, false},
	} {
		if got := NotSent(tc.err); got != tc.want {
			t.Errorf("NotSent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
