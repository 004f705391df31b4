package sink

import (
	"context"
	"errors"
)

// ErrLate is returned by Send when the check carried by its context (see
// WithGate) refused the send because the moment for it had passed: nothing
// was written to the provider. It matches none of ErrPermanent,
// ErrTransient and ErrThrottled: the job did not fail, it was not sent.
var ErrLate = errors.New("sink: too late to send")

type gateKey struct{}

// WithGate returns a context that carries check. A Sender calls Gate on the
// context as the last step before it writes the request; when check returns
// an error, nothing is written and Send returns that error. A Sender may
// run check more than once for one request (the HTTP sink runs it when the
// request is handed to the transport and again right before its first
// byte is written); the last run that passes is the moment the request
// left. The engine uses it to send only within a pacer slot's lateness
// bound.
func WithGate(ctx context.Context, check func() error) context.Context {
	return context.WithValue(ctx, gateKey{}, check)
}

// Gate runs the check that ctx carries, if any, and returns its error.
func Gate(ctx context.Context) error {
	if check, ok := ctx.Value(gateKey{}).(func() error); ok {
		return check()
	}
	return nil
}
