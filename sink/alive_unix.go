//go:build unix

package sink

import (
	"crypto/tls"
	"net"
	"syscall"
)

// alive reports whether c, a connection idle on our side, is still open:
// a non-blocking read of its socket finds nothing to read (a server that
// closed it would have its EOF read; one that sent something unasked
// leaves it unusable).
func alive(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, rerr := syscall.Read(int(fd), b[:])
		open = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}
