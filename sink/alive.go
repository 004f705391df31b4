package sink

import "net"

// alive reports whether c, a connection idle on our side, is still open
// (see probe.alive). A connection checked again and again keeps a probe
// instead (pconn.live): this one makes a probe per call.
func alive(c net.Conn) bool { return newProbe(c).alive() }
