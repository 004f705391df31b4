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

type holdKey struct{}

// WithHold returns a context that carries hold: a wait until the moment the
// request may leave (the dispatch engine's: until its pacer slot comes).
// A Sender that holds (Holder) runs it through Hold as the very last step
// before it writes, so that the engine can hand it the request ahead of
// its slot, and the request is built and its connection taken while the
// slot is still to come. When hold returns an error, nothing is written and
// Send returns that error.
func WithHold(ctx context.Context, hold func() error) context.Context {
	return context.WithValue(ctx, holdKey{}, hold)
}

// Hold runs the hold that ctx carries, if any, then its gate (Gate), and
// returns the first error. A Holder calls it right before it writes the
// request, and Gate alone at any earlier check.
func Hold(ctx context.Context) error {
	if hold, ok := ctx.Value(holdKey{}).(func() error); ok {
		if err := hold(); err != nil {
			return err
		}
	}
	return Gate(ctx)
}

// Holder is a Sender that runs Hold right before it writes each request:
// the dispatch engine hands it requests a little ahead of their slots (and
// hands a Sender that is no Holder each request only once its slot has
// come). HTTP and Log are Holders.
type Holder interface {
	Sender
	// Holds reports whether Send runs Hold right before its write.
	Holds() bool
}
