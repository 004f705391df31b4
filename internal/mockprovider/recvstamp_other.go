//go:build !linux

package mockprovider

import "net"

// stampListen returns ln as it is: receive stamps are read on Linux only,
// and arrivals elsewhere are stamped by the handler's clock.
func stampListen(ln net.Listener) net.Listener { return ln }
