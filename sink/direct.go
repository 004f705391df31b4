package sink

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// direct is the sink's transport for requests that go through no proxy:
// HTTP/1.1 over connections it keeps itself, each request written and its
// answer read in the caller's goroutine. net/http's transport hands every
// request to two goroutines of its connection (one writes, one reads) and
// back, and those hand-offs and wake-ups are a good part of a replica's
// CPU at the ceiling. Here net/http still serialises the request
// (Request.Write) and parses the answer (ReadResponse), on the caller's
// goroutine.
//
// What it keeps of net/http's transport, as gatedTransport relies on it:
// the connection chosen for a request is armed with the request's gate
// (writeGate.arm: directly when gatedTransport hands it the request, else
// through the request's httptrace GotConn, as net/http does), it
// dials through the sink's gated dials, a request the gate refused at its
// write leaves its connection clean (here it goes back to the pool at
// once), at most MaxInFlight requests are in flight, and a request is
// written at most once: a connection that
// fails, before or after the request left, fails the request (the engine
// retries it on a later slot). A kept connection found closed by the
// provider while idle is not written on. A request whose proxy (via.Proxy,
// from HTTP_PROXY, HTTPS_PROXY and NO_PROXY) names one goes through via,
// net/http's transport.
type direct struct {
	via     *http.Transport // for requests through a proxy; its Proxy decides
	dial    dialFunc        // plain connections (spares.gatedDial)
	dialTLS dialFunc        // TLS connections (spares.gatedDialTLS)
	slots   chan struct{}   // one per request in flight: MaxInFlight at most
	maxIdle int             // idle connections kept at most, for all addresses
	idleFor time.Duration   // an idle connection older than this is closed, not reused

	mu   sync.Mutex
	idle map[string][]*pconn // by scheme and address, newest last
}

// newDirect returns a direct transport with at most max requests in flight
// and max idle connections kept, falling back to via for proxied requests.
func newDirect(via *http.Transport, max int) *direct {
	return &direct{
		via:     via,
		dial:    via.DialContext,
		dialTLS: via.DialTLSContext,
		slots:   make(chan struct{}, max),
		maxIdle: max,
		idleFor: via.IdleConnTimeout,
		idle:    map[string][]*pconn{},
	}
}

// pconn is one connection to the provider and its read buffer.
type pconn struct {
	c      net.Conn // a gateConn, or the TLS connection over one
	key    string
	br     *bufio.Reader
	live   *probe // the socket beneath c, checked before c is reused
	idleAt time.Time
}

// requestBufs holds the buffers requests are written into before they
// leave in one write.
var requestBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledRequest is the largest request buffer kept for the next one.
const maxPooledRequest = 64 << 10

// RoundTrip sends req on a kept or new connection and reads the answer's
// head; the answer's body is read from the connection by the caller, and
// closing it hands the connection back (when it was read to its end).
func (d *direct) RoundTrip(req *http.Request) (*http.Response, error) { return d.send(req, nil) }

// send is RoundTrip, with the connection req goes on armed with g (see
// writeGate.arm) when g is not nil, else reported to req's httptrace
// GotConn, if any.
func (d *direct) send(req *http.Request, g *writeGate) (*http.Response, error) {
	if d.via.Proxy != nil {
		if u, err := d.via.Proxy(req); err != nil || u != nil {
			if g != nil {
				return gatedTransport{next: d.via}.traced(req, g)
			}
			return d.via.RoundTrip(req)
		}
	}
	var dial dialFunc
	port := req.URL.Port()
	switch req.URL.Scheme {
	case "http":
		dial = d.dial
		if port == "" {
			port = "80"
		}
	case "https":
		dial = d.dialTLS
		if port == "" {
			port = "443"
		}
	default:
		return d.via.RoundTrip(req) // net/http names the scheme in its error
	}
	addr := net.JoinHostPort(req.URL.Hostname(), port)
	key := req.URL.Scheme + "|" + addr
	ctx := req.Context()
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		closeBody(req)
		return nil, ctx.Err()
	}
	resp, err := d.roundTrip(ctx, req, key, addr, dial, g)
	if err != nil {
		<-d.slots
	}
	return resp, err
}

// roundTrip is RoundTrip with its slot taken: on success the answer's body
// gives the slot back when closed.
func (d *direct) roundTrip(ctx context.Context, req *http.Request, key, addr string, dial dialFunc, g *writeGate) (*http.Response, error) {
	// The whole request is written into buf first, so that it leaves in
	// one write.
	buf := requestBufs.Get().(*bytes.Buffer)
	buf.Reset()
	writing := false // a goroutine of exchange still writes from buf
	defer func() {
		if !writing && buf.Cap() <= maxPooledRequest {
			requestBufs.Put(buf)
		}
	}()
	if err := req.Write(buf); err != nil {
		return nil, fmt.Errorf("write request: %w", err)
	}
	pc, reused := d.take(key), true
	if pc == nil {
		reused = false
		c, err := dial(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		pc = &pconn{c: c, key: key, br: bufio.NewReader(c), live: newProbe(socket(c))}
	}
	if info := (httptrace.GotConnInfo{Conn: pc.c, Reused: reused, WasIdle: reused}); g != nil {
		g.arm(info)
	} else if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.GotConn != nil {
		trace.GotConn(info)
	}
	stop := context.AfterFunc(ctx, func() { _ = pc.c.SetDeadline(aLongTimeAgo) })
	resp, writing, err := d.exchange(pc, buf.Bytes(), req)
	if err != nil {
		if _, gate := refused(err); gate {
			// Nothing of req was written: the connection goes back to the
			// pool as it was, for the next request.
			if gc, ok := pc.c.(*gateConn); ok && stop() && gc.reclaim() {
				d.put(pc)
				return nil, err
			}
		}
		stop()
		_ = pc.c.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, err
	}
	b := &directBody{rc: resp.Body, d: d, pc: pc, stop: stop,
		keep: !resp.Close && !req.Close && resp.StatusCode >= 200}
	if resp.Body == http.NoBody {
		b.eof = true
		_ = b.Close()
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// maxSoloWrite is the largest request written whole before its answer is
// read. A provider may answer before it has read a body (a 413 or a 429 as
// soon as it has the head), then hold the connection without reading on,
// or close it with the body unread, which resets it: a request this small
// fits in the kernel's buffers on the way and its write completes; the
// rest of a larger one is written while its answer is read, so that the
// provider's answer, not a blocked or reset write, is what the send
// returns.
const maxSoloWrite = 32 << 10

// exchange writes the request wire on pc (the gateConn beneath runs the
// request's gate first) and reads the answer's head. A request of up to
// maxSoloWrite bytes leaves in one write before the answer is read; of a
// larger one, the first maxSoloWrite bytes leave first (the gate runs on
// them), and the rest in a goroutine of its own while the answer is read.
// The second result tells whether that goroutine still holds wire when
// exchange returns: the caller must not reuse it then.
func (d *direct) exchange(pc *pconn, wire []byte, req *http.Request) (*http.Response, bool, error) {
	if _, err := pc.c.Write(wire[:min(len(wire), maxSoloWrite)]); err != nil {
		return nil, false, err
	}
	if len(wire) <= maxSoloWrite {
		resp, err := readResponse(pc.br, req)
		return resp, false, err
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := pc.c.Write(wire[maxSoloWrite:])
		wrote <- err
	}()
	// A write that fails leaves the connection broken: the read ends too,
	// with the answer if the provider sent one before.
	resp, err := readResponse(pc.br, req)
	if err != nil {
		_ = pc.c.Close() // ends the write, if it still waits
		<-wrote
		return nil, false, err
	}
	t := time.NewTimer(writeWait)
	defer t.Stop()
	select {
	case werr := <-wrote:
		// The connection is reused only when the whole request left.
		resp.Close = resp.Close || werr != nil
		return resp, false, nil
	case <-t.C:
		// The provider answered before it took the whole request: the
		// connection is closed when the answer is, which ends the write.
		resp.Close = true
		return resp, true, nil
	}
}

// writeWait is how long an answer read before its request's write ended
// waits for that write, to tell whether the connection can be reused.
const writeWait = 50 * time.Millisecond

// readResponse reads the answer to req, past any 1xx interim answer.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
}

// closeBody closes req's body, as a RoundTripper must even on errors.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// take returns the newest idle connection for key that is still open, or
// nil.
func (d *direct) take(key string) *pconn {
	d.mu.Lock()
	defer d.mu.Unlock()
	for l := d.idle[key]; len(l) > 0; l = d.idle[key] {
		pc := l[len(l)-1]
		l[len(l)-1] = nil
		d.idle[key] = l[:len(l)-1]
		if time.Since(pc.idleAt) < d.idleFor && pc.live.alive() {
			return pc
		}
		_ = pc.c.Close()
	}
	return nil
}

// socket is the TCP connection beneath c, a gateConn or the TLS
// connection over one.
func socket(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*gateConn); ok {
		c = gc.Conn
	}
	return c
}

// put keeps pc for the next request to its address, or closes it when as
// many are kept already.
func (d *direct) put(pc *pconn) {
	d.mu.Lock()
	n := 0
	for _, l := range d.idle {
		n += len(l)
	}
	if n >= d.maxIdle {
		d.mu.Unlock()
		_ = pc.c.Close()
		return
	}
	pc.idleAt = time.Now()
	d.idle[pc.key] = append(d.idle[pc.key], pc)
	d.mu.Unlock()
}

// CloseIdleConnections closes the kept connections, and via's.
func (d *direct) CloseIdleConnections() {
	d.mu.Lock()
	idle := d.idle
	d.idle = map[string][]*pconn{}
	d.mu.Unlock()
	for _, l := range idle {
		for _, pc := range l {
			_ = pc.c.Close()
		}
	}
	d.via.CloseIdleConnections()
}

// directBody is an answer's body read from its connection: closed after it
// was read to its end, it hands the connection back for the next request;
// closed before, it closes the connection. Either way it frees the
// request's slot.
type directBody struct {
	rc   io.ReadCloser
	d    *direct
	pc   *pconn
	stop func() bool // stops the context's deadline on the connection
	keep bool        // the answer lets the connection be reused
	eof  bool
	done bool
}

// errBodyClosed is what a read after Close returns.
var errBodyClosed = errors.New("sink: read on a closed answer body")

func (b *directBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, errBodyClosed
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close gives the connection back, or closes it, and frees the slot.
func (b *directBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	_ = b.rc.Close()
	reuse := b.keep && b.eof && b.stop() && b.pc.br.Buffered() == 0 &&
		b.pc.c.SetDeadline(time.Time{}) == nil
	if reuse {
		b.d.put(b.pc)
	} else {
		b.stop()
		_ = b.pc.c.Close()
	}
	<-b.d.slots
	return nil
}
