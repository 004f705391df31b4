package main

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/testredis"
)

// silentServer listens on a free loopback port and accepts connections
// that never hear a byte, as a NATS server that hangs would; it stops when
// the test ends. It returns the server's nats:// URL.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "nats://" + ln.Addr().String()
}

// With NATS servers that do not answer, status spends at most the queue's
// own bound on them: it still reads the pacer and the replicas in Redis,
// and names the queue, not Redis, as what it could not read.
func TestStatusBlamesNATSNotRedis(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	urls := []string{silentServer(t), silentServer(t), silentServer(t)}
	env := map[string]string{"SLUICE_QUEUE_BACKEND": "nats", "SLUICE_NATS_URL": strings.Join(urls, ","),
		"SLUICE_REDIS_URL": srv.URL(), "SLUICE_QUEUE_NAME": "sms"}
	code, out, stderr := runCmd(t, env, "status")
	if code != 1 || !strings.Contains(stderr, "queue unreachable") || !strings.Contains(stderr, "nats") {
		t.Errorf("status with silent NATS servers: exit %d, stderr %q; want 1 and the queue unreachable on nats", code, stderr)
	}
	if strings.Contains(stderr, "pacer unreachable") || strings.Contains(stderr, "replicas unreadable") ||
		!strings.Contains(out, "live replicas  0") || !strings.Contains(out, "schedule") {
		t.Errorf("status with silent NATS servers but Redis up: want the pacer and replicas read\nstdout:\n%s\nstderr:\n%s", out, stderr)
	}
}
