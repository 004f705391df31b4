//go:build unix

package sink

import (
	"crypto/tls"
	"net"
	"syscall"
)

// probe is alive for one connection, checked again and again (a kept
// connection, before each request it carries): the socket's raw
// connection is looked up once and the read's callback bound once, so a
// check allocates nothing (the per-call closure, raw connection and
// buffer of alive cost five allocations per request at the ceiling).
// A probe is not safe for concurrent use.
type probe struct {
	rc   syscall.RawConn // nil: c is no socket, and is trusted
	bad  bool            // the raw connection could not be had
	open bool
	b    [1]byte
	fn   func(fd uintptr) bool
}

// newProbe returns the probe of c (a TLS connection's is its socket's).
func newProbe(c net.Conn) *probe {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	p := &probe{}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return p
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		p.bad = true
		return p
	}
	p.rc = rc
	p.fn = p.read
	return p
}

// read is the non-blocking read, run by the raw connection.
func (p *probe) read(fd uintptr) bool {
	_, err := syscall.Read(int(fd), p.b[:])
	p.open = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
	return true
}

// alive reports whether the probed connection, idle on our side, is still
// open: a non-blocking read of its socket finds nothing to read (a server
// that closed it would have its EOF read; one that sent something unasked
// leaves it unusable).
func (p *probe) alive() bool {
	if p.bad {
		return false
	}
	if p.rc == nil {
		return true
	}
	p.open = false
	return p.rc.Read(p.fn) == nil && p.open
}
