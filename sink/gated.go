package sink

import (
	"errors"
	"io"
	"net/http"
)

// gatedTransport runs the gate a request's context carries (see WithGate)
// and, only when the gate lets the request go, the transport beneath,
// which writes it. A refused request is never handed to the transport: no
// connection is opened and nothing is written.
//
// A request that passed the gate is written at most once. net/http writes
// a request with an Idempotency-Key header again on its own when a reused
// connection breaks after the request went out, and that second copy would
// reach the provider on the same pacer slot, beyond the cap. The transport
// may still retry an attempt that wrote nothing (a connection the server
// had closed while idle), at once and on the same slot.
type gatedTransport struct {
	next http.RoundTripper
}

// gateError carries the error of a gate that refused a request through
// http.Client, so that Send can tell it from a failed round trip.
type gateError struct{ err error }

func (e *gateError) Error() string { return e.err.Error() }
func (e *gateError) Unwrap() error { return e.err }

// RoundTrip runs the gate, then the transport beneath.
func (t gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := Gate(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on errors
		}
		return nil, &gateError{err: err}
	}
	once := req.WithContext(req.Context()) // a shallow copy: RoundTrip must not change req
	once.GetBody = func() (io.ReadCloser, error) { return nil, errWrittenOnce }
	return t.next.RoundTrip(once)
}

// errWrittenOnce refuses to rewind a request body for a second write.
var errWrittenOnce = errors.New("sink: the connection broke after the request was written; " +
	"not written again on the same slot")

// CloseIdleConnections closes the idle connections of the transport
// beneath, for HTTP.Close (http.Client calls it only on a transport that
// has it).
func (t gatedTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// refused returns the gate's error when err is a refusal by the gate.
func refused(err error) (error, bool) {
	if ge, ok := errors.AsType[*gateError](err); ok {
		return ge.err, true
	}
	return nil, false
}
