//go:build linux

package mockprovider

import (
	"errors"
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stampListener wraps the TCP connections it accepts so that each read
// records the kernel's receive time (see recvstamp.go).
type stampListener struct{ net.Listener }

// stampListen returns ln, wrapped so its connections are stamped. It
// turns stamps on for the listening socket too: the kernel starts taking
// them a moment after the first socket asks (the switch is deferred), and
// asking at listen time has them ready for the first request.
func stampListen(ln net.Listener) net.Listener {
	if tl, ok := ln.(*net.TCPListener); ok {
		if raw, err := tl.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) {
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
			})
		}
	}
	return stampListener{ln}
}

// Accept accepts a connection and turns on receive stamps for it; a
// connection where that fails is returned as it is.
func (l stampListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return c, nil
	}
	return &linuxStampedConn{TCPConn: tc, raw: raw}, nil
}

// linuxStampedConn reads with recvmsg and keeps the SCM_TIMESTAMPNS that
// comes with the bytes.
type linuxStampedConn struct {
	*net.TCPConn
	raw syscall.RawConn
	recvStamp
	oob [64]byte // read by one goroutine at a time, as net.Conn's Read is
}

// Read reads like the TCP connection's Read, through the runtime's poller
// (deadlines hold), and records the receive time of the bytes read.
func (c *linuxStampedConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n, oobn int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, c.oob[:], 0)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		if n < 0 {
			n = 0
		}
		return n, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if n == 0 {
		return 0, io.EOF
	}
	if ns := timestampNS(c.oob[:oobn]); ns != 0 {
		c.ns.Store(ns)
	}
	return n, nil
}

// WriteTo shadows *net.TCPConn's, which would read the socket around Read
// and its stamp (io.Copy prefers it); reading goes through Read instead.
func (c *linuxStampedConn) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, struct{ io.Reader }{c})
}

// timestampNS returns the SCM_TIMESTAMPNS in a control message, as Unix
// nanoseconds, or 0 when there is none.
func timestampNS(oob []byte) int64 {
	if len(oob) == 0 {
		return 0
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_TIMESTAMPNS {
			continue
		}
		if len(m.Data) < int(unsafe.Sizeof(unix.Timespec{})) {
			return 0
		}
		var ts unix.Timespec
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts)), m.Data)
		return ts.Nano()
	}
	return 0
}
