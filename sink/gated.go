package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// gatedTransport runs the gate a request's context carries (see WithGate)
// twice: before the request is handed to the transport beneath, so that a
// late request opens no connection, and again on the connection, right
// before the request's first byte is written (gateConn), so that no wait
// in between (a dial, a busy connection pool, the machine's scheduler)
// can turn a passed gate into a late send. A refused request is not
// written.
//
// A request that passed the gate is written at most once. net/http writes
// a request with an Idempotency-Key header again on its own when a reused
// connection breaks after the request went out, and that second copy would
// reach the provider on the same pacer slot, beyond the cap. The transport
// may still retry an attempt that wrote nothing (a connection the server
// had closed while idle), at once and on the same slot.
type gatedTransport struct {
	next   http.RoundTripper
	spares *spares // nil when next dials no gateConn
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
	st := &writeGate{ctx: req.Context()}
	if d, ok := t.next.(*direct); ok {
		// The sink's own transport arms the connection it takes itself,
		// and writes nothing twice: no trace, no rewind, no copy of req.
		resp, err := d.send(req, st)
		if err != nil {
			if gerr := st.refusal(); gerr != nil {
				return nil, &gateError{err: gerr}
			}
		}
		return resp, err
	}
	return t.traced(req, st)
}

// traced runs req through the transport beneath with st armed on the
// connection it gets (the GotConn of an httptrace), and never rewound.
func (t gatedTransport) traced(req *http.Request, st *writeGate) (*http.Response, error) {
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: st.arm})
	once := req.WithContext(ctx) // a shallow copy: RoundTrip must not change req
	once.GetBody = st.rewind
	resp, err := t.next.RoundTrip(once)
	if err != nil {
		if gerr := st.refusal(); gerr != nil {
			return nil, &gateError{err: gerr}
		}
	}
	return resp, err
}

// writeGate is one request's gate at write time: GotConn arms the
// connection the transport chose with it, and the connection runs it at
// the request's first write.
type writeGate struct {
	ctx     context.Context
	mu      sync.Mutex
	refused error // the gate's error, once it refused at write time
}

// arm hands the gate to the connection the request is about to be
// written on. On a connection that is not a gateConn (none of ours: the
// transport dials through gatedDial) the gate already ran in RoundTrip,
// and arm only waits out the request's hold, so that it never leaves
// before its moment.
func (g *writeGate) arm(info httptrace.GotConnInfo) {
	c := info.Conn
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*gateConn); ok {
		if c != info.Conn {
			gc.mu.Lock()
			gc.underTLS = true
			gc.mu.Unlock()
		}
		gc.armed.Store(g)
		return
	}
	if hold, ok := g.ctx.Value(holdKey{}).(func() error); ok {
		_ = hold() // nothing can stop the write from here; an ended ctx fails it
	}
}

// check runs the request's hold and gate (Hold), remembering a refusal.
func (g *writeGate) check() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refused != nil {
		return g.refused
	}
	if err := Hold(g.ctx); err != nil {
		g.refused = err
		return err
	}
	return nil
}

// refusal returns the gate's error when it refused at write time.
func (g *writeGate) refusal() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused
}

// rewind is the request's GetBody: net/http asks for it to write the
// request again, which a gated request never is.
func (g *writeGate) rewind() (io.ReadCloser, error) {
	if err := g.refusal(); err != nil {
		return nil, &gateError{err: err}
	}
	return nil, errWrittenOnce
}

// gateConn is a connection to the provider that runs the gate it was
// armed with (see writeGate.arm) before the first write after arming.
// When the gate refuses, nothing is written: the write fails, and
// RoundTrip reports the refusal. net/http then closes the connection; a
// gateConn whose refusal left it clean goes to the spares instead (see
// Close), for the transport's next dial.
type gateConn struct {
	net.Conn
	armed  atomic.Pointer[writeGate]
	spares *spares // where a clean connection goes on Close
	key    string  // its dial key there

	mu       sync.Mutex
	reading  sync.Cond // signalled when a Read returns
	reads    int       // Reads in progress
	refused  bool      // the gate refused a write (nothing of that request was written)
	tainted  bool      // refused, then something was read, written or failed: not clean
	underTLS bool      // net/http runs TLS over this connection: its state is above, not here
	closed   bool
}

func newGateConn(c net.Conn, s *spares, key string) *gateConn {
	gc := &gateConn{Conn: c, spares: s, key: key}
	gc.reading.L = &gc.mu
	return gc
}

// Write runs the armed gate, if any, then writes p.
func (c *gateConn) Write(p []byte) (int, error) {
	if g := c.armed.Swap(nil); g != nil {
		if err := g.check(); err != nil {
			c.mu.Lock()
			c.refused = true
			c.mu.Unlock()
			return 0, &gateError{err: err}
		}
	}
	c.mu.Lock()
	if c.refused {
		c.tainted = true
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// Read reads from the connection; after Close it reads nothing (the
// connection may be another gateConn's by then).
func (c *gateConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, net.ErrClosed
	}
	c.reads++
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.reads--
	if c.refused && (n > 0 || err != nil && !errors.Is(err, os.ErrDeadlineExceeded)) {
		c.tainted = true
	}
	c.reading.Broadcast()
	c.mu.Unlock()
	return n, err
}

// reclaim readies c for another request after its gate refused one, when
// the refusal left it clean (nothing of that request written, nothing read
// since), and reports whether it did. The sink's own transport (direct)
// keeps such a connection in its pool, as if the refused request had never
// taken it; net/http's closes it (Close keeps it in the spares).
func (c *gateConn) reclaim() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.refused || c.tainted || c.closed || c.underTLS || c.reads > 0 {
		return false
	}
	c.refused = false
	return true
}

// Close closes the connection, unless a refusal left it clean: nothing of
// the refused request was written, the previous answer was read whole
// (net/http reuses no connection before), and nothing came from the
// server since. Then the read net/http keeps waiting on it is ended with a
// deadline, and once that read has returned empty the connection goes to
// the spares for the next dial. Under a TLS that net/http runs (a
// proxy's tunnel) the TLS state lives above this connection and dies with
// it, so it is closed.
func (c *gateConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	clean := c.spares != nil && c.refused && !c.tainted && !c.underTLS
	c.mu.Unlock()
	if !clean {
		return c.Conn.Close()
	}
	if err := c.Conn.SetReadDeadline(aLongTimeAgo); err != nil {
		return c.Conn.Close()
	}
	c.mu.Lock()
	for c.reads > 0 {
		c.reading.Wait()
	}
	clean = !c.tainted
	c.mu.Unlock()
	if !clean || c.Conn.SetReadDeadline(time.Time{}) != nil {
		return c.Conn.Close()
	}
	c.spares.put(c.key, c.Conn)
	return nil
}

// aLongTimeAgo is a read deadline that ends a read at once.
var aLongTimeAgo = time.Unix(1, 0)

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
	if t.spares != nil {
		t.spares.close()
	}
}

// refused returns the gate's error when err is a refusal by the gate.
func refused(err error) (error, bool) {
	if ge, ok := errors.AsType[*gateError](err); ok {
		return ge.err, true
	}
	return nil, false
}
