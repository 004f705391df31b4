// Package testnats runs a NATS server with JetStream inside the test process,
// on a free 127.0.0.1 port with its store in a temporary directory, and shuts
// it down when the test ends. It can shut the server down and start it again
// on the same port and store, to test what survives a restart.
package testnats

import (
	"context"
	"fmt"
	"net"
	"strings"
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

// Cluster is a JetStream cluster of embedded NATS servers owned by a test,
// joined by routes on loopback ports.
type Cluster struct {
	t       testing.TB
	Servers []*Server
}

// StartCluster starts n embedded JetStream servers (n1, n2, ...) in one
// cluster, waits until they have elected a meta leader and each serves
// JetStream, and shuts them down when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 3 {
		t.Fatalf("testnats: a JetStream cluster needs at least 3 servers, got %d", n)
	}
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testnats: free port: %v", err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[i])
	}
	c := &Cluster{t: t}
	for i := range n {
		s := &Server{t: t, opts: server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "sluice", Host: "127.0.0.1", Port: ports[i]},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		}}
		s.start()
		s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
		t.Cleanup(s.Shutdown)
		c.Servers = append(c.Servers, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.waitPlacement(ctx, n); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitPlacement waits until a stream of n replicas can be placed: a meta
// leader that is current does not yet know that every peer runs
// JetStream, and a stream created then fails with "no suitable peers for
// placement". It creates and deletes a probe stream until that works.
func (c *Cluster) waitPlacement(ctx context.Context, n int) error {
	nc, err := nats.Connect(c.URL())
	if err != nil {
		return fmt.Errorf("testnats: connect: %w", err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		return fmt.Errorf("testnats: jetstream: %w", err)
	}
	const probe = "testnats_placement_probe"
	for {
		_, err := js.AddStream(&nats.StreamConfig{Name: probe, Subjects: []string{probe}, Replicas: n}, nats.Context(ctx))
		if err == nil {
			if err := js.DeleteStream(probe, nats.Context(ctx)); err != nil {
				return fmt.Errorf("testnats: delete the placement probe: %w", err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testnats: a stream of %d replicas cannot be placed: %w (last: %v)", n, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// URL is every running server's client URL, comma-separated, as nats.url
// takes them.
func (c *Cluster) URL() string {
	var urls []string
	for _, s := range c.Servers {
		if s.running() {
			urls = append(urls, s.URL())
		}
	}
	return strings.Join(urls, ",")
}

// Conn returns a new connection to the cluster that reconnects forever and
// is closed when the test ends.
func (c *Cluster) Conn() *nats.Conn {
	c.t.Helper()
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		c.t.Fatalf("testnats: connect: %v", err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// WaitReady waits until the running servers have a JetStream meta leader
// and each is current with it, or ctx ends.
func (c *Cluster) WaitReady(ctx context.Context) error {
	for {
		leader, current := false, true
		for _, s := range c.Servers {
			srv := s.server()
			if srv == nil {
				continue
			}
			leader = leader || srv.JetStreamIsLeader()
			current = current && srv.JetStreamIsCurrent()
		}
		if leader && current {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testnats: cluster has no JetStream leader: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StreamLeader returns the running server that leads stream, or nil.
func (c *Cluster) StreamLeader(stream string) *Server {
	for _, s := range c.Servers {
		if srv := s.server(); srv != nil && srv.JetStreamIsStreamLeader(globalAccount, stream) {
			return s
		}
	}
	return nil
}

// globalAccount is the account of a server without accounts configured.
const globalAccount = "$G"

// server returns the running server, or nil after Shutdown.
func (s *Server) server() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil || !s.srv.Running() {
		return nil
	}
	return s.srv
}

func (s *Server) running() bool { return s.server() != nil }
