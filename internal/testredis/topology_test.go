package testredis_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
)

// A 3-master cluster with one replica each serves a key through a cluster
// client, and keeps it after the master of its slot is killed: the replica
// takes over.
func TestClusterFailover(t *testing.T) {
	c := testredis.StartCluster(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc := c.Client()
	const key = "sluice:{t}:k"
	if err := rc.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	master, err := c.MasterFor(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	node, err := rc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := node.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: got %d, %v; want 1 replica", n, err)
	}
	master.Kill()
	if _, err := c.WaitFailover(ctx, key, master); err != nil {
		t.Fatal(err)
	}
	if got, err := rc.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("after failover: got %q, %v; want v", got, err)
	}
}

// With a Link, each node announces its proxy: clients and replicas go
// through it (the replicas' links are seen passing), and a master killed
// with its proxy is still failed over to its replica, which keeps what
// was written.
func TestClusterLinkFailover(t *testing.T) {
	links := map[string]*proxy{}
	c := testredis.StartClusterWith(t, testredis.ClusterOptions{Masters: 3, ReplicasPerMaster: 1,
		Link: func(addr string) string {
			p := startProxy(t, addr)
			links[p.addr()] = p
			return p.addr()
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc := c.Client()
	const key = "sluice:{t}:k"
	if err := rc.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	node, err := rc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	link := links[node.Options().Addr]
	if link == nil {
		t.Fatalf("the client reaches the master of %s at %s, not through a link", key, node.Options().Addr)
	}
	if n, err := node.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: got %d, %v; want 1 replica", n, err)
	}
	if link.conns() < 2 {
		t.Fatalf("%d connections through the master's link; want the client's and the replica's", link.conns())
	}
	master, err := c.MasterFor(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	link.cut()
	master.Kill()
	if _, err := c.WaitFailover(ctx, key, master); err != nil {
		t.Fatal(err)
	}
	if got, err := rc.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("after failover: got %q, %v; want v", got, err)
	}
	master.Restart() // back without its link, as a replica of the new master
	if err := c.WaitOK(ctx); err != nil {
		t.Fatal(err)
	}
}

// proxy forwards TCP connections to an upstream both ways.
type proxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	open     []net.Conn
	accepted int
	closed   bool
	wg       sync.WaitGroup
}

// startProxy starts a proxy on a free loopback port in front of
// upstream, cut when the test ends.
func startProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: listen: %v", err)
	}
	p := &proxy{ln: ln, upstream: upstream}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.cut)
	return p
}

// addr is the proxy's host:port.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// conns returns how many connections the proxy has accepted.
func (p *proxy) conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// cut closes the proxy and its connections, and waits for its goroutines.
func (p *proxy) cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.open {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.upstream, 2*time.Second)
		if err != nil {
			_ = down.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = down.Close()
			_ = up.Close()
			return
		}
		p.open = append(p.open, down, up)
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(up, down); _ = up.Close() }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(down, up); _ = down.Close() }()
	}
}

// The sentinels fail a killed master over to its replica, which keeps what
// was written.
func TestSentinelFailover(t *testing.T) {
	g := testredis.StartSentinelGroup(t, testredis.SentinelOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc := g.Client()
	if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: got %d, %v; want 1 replica", n, err)
	}
	if a, err := g.MasterAddr(ctx); err != nil || a != g.Master.Addr() {
		t.Fatalf("master: got %s, %v; want %s", a, err, g.Master.Addr())
	}
	g.Master.Kill()
	if err := g.WaitMaster(ctx, g.Replica.Addr()); err != nil {
		t.Fatal(err)
	}
	if got, err := rc.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("after failover: got %q, %v; want v", got, err)
	}
}
