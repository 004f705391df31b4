package mockprovider

import (
	"context"
	"net"
	"sync/atomic"
	"time"
)

// A provider's count is only as exact as its clock. Stamping an arrival
// with time.Now in the handler adds the provider's own delays to it: the
// Go runtime notices a readable socket only when a thread is free to poll
// (up to 10ms later on a busy machine), and the operating system may not
// run the provider at all for a few milliseconds. Those delays compress
// the recorded times of requests that left on an even schedule, and a
// window judged on them counts requests that never arrived together.
//
// So on Linux each connection asks the kernel for the time it received
// each segment (SO_TIMESTAMPNS): on loopback the kernel takes it in the
// sender's write, so the recorded arrival is when the request reached the
// provider's host, as a provider's load balancer would see it. Elsewhere,
// or when the kernel gives no stamp, the handler's clock is used.

// stampedConn is a connection that remembers when the kernel received the
// bytes it last read.
type stampedConn interface {
	net.Conn
	// lastReceived returns the kernel's receive time of the last bytes
	// read, as Unix nanoseconds, or 0 when unknown.
	lastReceived() int64
}

// recvStamp holds the last receive time a connection read.
type recvStamp struct{ ns atomic.Int64 }

func (s *recvStamp) lastReceived() int64 { return s.ns.Load() }

// connKey is the context key under which serve stores a request's
// connection.
type connKey struct{}

// withConn stores c in ctx, for arrivedAt (http.Server.ConnContext).
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// maxStampAge is how far before now a receive stamp may lie and still be
// believed; an older one (a clock step) falls back to now.
const maxStampAge = time.Second

// arrivedAt returns when the request on ctx's connection reached the
// provider's host: the kernel's receive time of its bytes when known,
// expressed on now's clock (monotonic reading kept), else now.
func arrivedAt(ctx context.Context, now time.Time) time.Time {
	c, ok := ctx.Value(connKey{}).(stampedConn)
	if !ok {
		return now
	}
	ns := c.lastReceived()
	if ns == 0 {
		return now
	}
	d := now.Sub(time.Unix(0, ns)) // both wall clock: time.Unix has no monotonic reading
	if d < 0 || d > maxStampAge {
		return now
	}
	return now.Add(-d)
}
