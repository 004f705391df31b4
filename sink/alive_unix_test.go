//go:build unix

package sink

import (
	"net"
	"testing"
	"time"
)

// TestProbeAllocatesNothing: a kept connection's probe checks it again
// and again without allocating, finds it open while the peer keeps it, and
// finds it closed once the peer closed it, as alive does.
func TestProbeAllocatesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, ok := <-accepted
	if !ok {
		t.Fatal("the listener accepted no connection")
	}
	p := newProbe(c)
	if !p.alive() || !alive(c) {
		t.Fatal("an open connection is not alive")
	}
	if n := testing.AllocsPerRun(100, func() { p.alive() }); n != 0 {
		t.Errorf("a probe's check allocates %v times, want 0", n)
	}
	peer.Close()
	eventually(t, 5*time.Second, func() bool { return !p.alive() }, "the peer's close reaches the probe")
	if alive(c) {
		t.Error("alive finds open a connection its probe found closed")
	}
}
