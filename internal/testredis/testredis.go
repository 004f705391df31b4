// Package testredis starts a private redis-server for a test, on a free
// 127.0.0.1 port with its own temporary directory, and stops it when the test
// ends. It never touches a Redis on the standard port.
//
// Where no redis-server binary is on the PATH it falls back to miniredis and
// says so in the test log; tests that need a real server (kill, restart, AOF)
// call [RequireReal] first.
package testredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Options say how the server is started. The zero value is a server with
// persistence off.
type Options struct {
	// AOF turns on the append-only file with fsync on every write, so that a
	// Kill and Restart keeps every acknowledged write.
	AOF bool
	// Fsync is the AOF's appendfsync policy when not "always": "everysec",
	// as the Compose stack runs it, keeps every acknowledged write through a
	// Kill too (the kernel holds what Redis wrote before it replied) without
	// an fsync per write, which on a busy shared disk stalls the server for
	// hundreds of milliseconds at a time.
	Fsync string
	// Cluster starts the server as a one-node Redis Cluster owning every
	// slot, so that tests can run a cluster client against it.
	Cluster bool
	// ReplicaOf (host:port) starts the server as a replica of that master.
	ReplicaOf string

	clusterNode bool     // cluster mode without claiming slots (StartCluster)
	args        []string // further arguments (StartCluster)
}

// Server is one redis-server (or miniredis) owned by a test.
type Server struct {
	t    testing.TB
	opts Options
	dir  string
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	mini *miniredis.Miniredis
}

// Start starts a server for t and registers its shutdown with t.Cleanup.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, opts: opts, dir: t.TempDir()}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Logf("testredis: no redis-server binary on PATH (%v); falling back to miniredis", err)
		s.mini = miniredis.RunT(t)
		return s
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatalf("testredis: free port: %v", err)
		}
		s.port = port
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.stop)
			return s
		}
	}
	t.Fatalf("testredis: start redis-server: %v", lastErr)
	return nil
}

// RequireReal skips the test when the server is a miniredis fallback.
func RequireReal(t testing.TB, s *Server) {
	t.Helper()
	if s.mini != nil {
		t.Skip("testredis: this test needs a real redis-server")
	}
}

// Mini returns the miniredis behind the server, or nil for a real server.
func (s *Server) Mini() *miniredis.Miniredis { return s.mini }

// Addr is the server's host:port.
func (s *Server) Addr() string {
	if s.mini != nil {
		return s.mini.Addr()
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// URL is the server's address as a redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Client returns a new client for the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the server at once with SIGKILL, as a crash would.
func (s *Server) Kill() {
	s.t.Helper()
	if s.mini != nil {
		s.t.Fatal("testredis: Kill needs a real redis-server")
	}
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts the server again on the same port and directory, so that
// an AOF written before Kill is loaded.
func (s *Server) Restart() {
	s.t.Helper()
	if s.mini != nil {
		s.t.Fatal("testredis: Restart needs a real redis-server")
	}
	var err error
	for range 50 { // the port may linger briefly after a kill
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("testredis: restart: %v", err)
}

// RestartAsReplicaOf starts the server again on the same port as a
// replica of master (host:port) from its first moment, as a failed master
// that comes back must: restarted as a master and only then told
// REPLICAOF, it would take writes on its own for that moment.
func (s *Server) RestartAsReplicaOf(master string) {
	s.t.Helper()
	s.opts.ReplicaOf = master
	s.Restart()
}

func (s *Server) start() error {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--daemonize", "no",
		"--protected-mode", "yes",
		"--logfile", filepath.Join(s.dir, "redis.log"),
		"--repl-diskless-sync-delay", "0", // a replica syncs at once, not 5s later
	}
	if s.opts.Cluster || s.opts.clusterNode {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.dir, "nodes.conf"))
	}
	if s.opts.ReplicaOf != "" {
		host, port, _ := net.SplitHostPort(s.opts.ReplicaOf)
		args = append(args, "--replicaof", host, port)
	}
	args = append(args, s.opts.args...)
	if s.opts.AOF {
		fsync := s.opts.Fsync
		if fsync == "" {
			fsync = "always"
		}
		args = append(args, "--appendonly", "yes", "--appendfsync", fsync)
	} else {
		args = append(args, "--appendonly", "no")
	}
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testredis: exec: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	err := waitReady(s.Addr(), done)
	if err == nil && s.opts.Cluster {
		err = claimSlots(s.Addr())
	}
	if err != nil {
		_ = cmd.Process.Kill()
		<-done
		return err
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return nil
}

func (s *Server) stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// waitReady polls PING until the server answers, the process exits or 10 s pass.
func waitReady(addr string, exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("testredis: redis-server on %s exited at start (port taken?)", addr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("testredis: redis-server on %s not ready after 10s", addr)
}

// claimSlots gives every slot to a fresh one-node cluster and waits until
// the cluster is up.
func claimSlots(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil && !strings.Contains(err.Error(), "already busy") {
		return fmt.Errorf("testredis: cluster addslots: %w", err)
	}
	for ctx.Err() == nil {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("testredis: cluster on %s not ok after 10s", addr)
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Sentinel is a redis-sentinel process watching a master.
type Sentinel struct {
	Addr string // host:port of the sentinel
}

// StartSentinel starts a sentinel on a free port that monitors master
// under masterName, and stops it when the test ends.
func StartSentinel(t testing.TB, master *Server, masterName string) *Sentinel {
	t.Helper()
	RequireReal(t, master)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	host, mport, _ := net.SplitHostPort(master.Addr())
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 5000\n",
		port, dir, masterName, host, mport, masterName)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("testredis: start sentinel: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitReady(addr, done); err != nil {
		t.Fatal(err)
	}
	return &Sentinel{Addr: addr}
}
