// Package testnats runs a NATS server with JetStream inside the test process,
// on a free 127.0.0.1 port with its store in a temporary directory, and shuts
// it down when the test ends. It can shut the server down and start it again
// on the same port and store, to test what survives a restart.
//
// StartProcCluster runs a JetStream cluster of real nats-server processes
// instead, whose nodes can be killed with SIGKILL (proc.go).
package testnats

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Server is one embedded NATS server owned by a test.
type Server struct {
	t    testing.TB
	opts server.Options

	mu  sync.Mutex
	srv *server.Server
}

// Start starts an embedded JetStream server for t and registers its shutdown
// with t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
	s.start()
	// Keep the chosen port so that Restart comes back on the same address.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(s.Shutdown)
	return s
}

// URL is the server's client URL (nats://127.0.0.1:port).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv.ClientURL()
}

// Conn returns a new connection to the server that reconnects forever and is
// closed when the test ends.
func (s *Server) Conn() *nats.Conn {
	s.t.Helper()
	nc, err := nats.Connect(s.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		s.t.Fatalf("testnats: connect: %v", err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}

// Shutdown stops the server; Restart starts it again.
func (s *Server) Shutdown() {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Shutdown()
	srv.WaitForShutdown()
}

// Restart starts the server again on the same port and JetStream store.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	s.start()
}

func (s *Server) start() {
	s.t.Helper()
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("testnats: new server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		s.t.Fatal("testnats: server not ready after 10s")
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}
