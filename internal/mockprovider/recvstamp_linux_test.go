//go:build linux

package mockprovider

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// The stamp is the kernel's receive time, not the time the bytes were
// read: bytes read 30ms after they were written carry the write's time.
func TestReceiveStampIsTheKernels(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := stampListen(ln)
	defer sl.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := sl.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer server.Close()
	sc, ok := server.(stampedConn)
	if !ok {
		t.Fatalf("accepted a %T, not a stamped connection", server)
	}

	// The kernel turns stamping on a moment after the first socket asks
	// (from a work queue, so on a loaded host later than 100 loopback
	// round trips take: that bound failed once in CI): exchange bytes until
	// one carries a stamp.
	buf := make([]byte, 64)
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; sc.lastReceived() == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("no receive stamp after %d reads in 5s", i)
		}
		if _, err := client.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := server.Read(buf); err != nil {
			t.Fatal(err)
		}
	}

	before := time.Now()
	if _, err := client.Write([]byte("POST /send HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	const held = 30 * time.Millisecond
	time.Sleep(held) // the provider is slow to read: the delay the stamp must not include
	n, err := server.Read(buf)
	if err != nil || n == 0 {
		t.Fatalf("read: %d, %v", n, err)
	}
	readAt := time.Now()
	got := time.Unix(0, sc.lastReceived())
	if got.Before(before.Add(-time.Millisecond)) || got.After(after.Add(time.Millisecond)) {
		t.Fatalf("stamp %v, want within the write [%v, %v] (read at %v)", got, before, after, readAt)
	}
	at := arrivedAt(context.WithValue(context.Background(), connKey{}, server), readAt)
	if lag := readAt.Sub(at); lag < held-time.Millisecond {
		t.Fatalf("arrivedAt is %v before the read, want about %v", lag, held)
	}

	client.Close()
	if _, err := server.Read(buf); err != io.EOF {
		t.Fatalf("read after close: %v, want io.EOF", err)
	}
}
