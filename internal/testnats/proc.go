package testnats

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ProcCluster is a JetStream cluster of real nats-server processes owned
// by a test, each on its own 127.0.0.1 ports (client, route, monitoring)
// with its store in a temporary directory. Unlike Cluster, a node can be
// killed with SIGKILL, as a crash or an OOM kill would end it, and started
// again on the same ports and store.
type ProcCluster struct {
	t testing.TB
	// Nodes are the cluster's servers, named n1, n2, ... in order.
	Nodes []*ProcNode

	nc *nats.Conn // the cluster's own connection, for StreamLeader
	js jetstream.JetStream
}

// ProcNode is one nats-server process of a ProcCluster.
type ProcNode struct {
	t        testing.TB
	name     string
	port     int // client port
	httpPort int // monitoring port
	dir      string
	args     []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Bounds of the waits of a ProcCluster.
const (
	// procStartWait bounds how long one process may take to listen.
	procStartWait = 15 * time.Second
	// procReadyWait bounds how long a new cluster may take to elect its
	// meta leader and place a stream on every node.
	procReadyWait = 60 * time.Second
	// procPoll is the interval between two checks of a condition.
	procPoll = 50 * time.Millisecond
	// procRequest bounds one request made while polling: a request sent
	// while the client reconnects may get no answer.
	procRequest = 2 * time.Second
)

// StartProcCluster starts n nats-server processes (n1, n2, ...) with
// JetStream in one cluster, routed to each other on loopback ports. It
// waits until every node reports itself healthy (a meta leader elected and
// every node current with it) and a stream with n replicas can be placed,
// and kills every process when the test ends. It skips t when nats-server
// is not on the PATH.
func StartProcCluster(t testing.TB, n int) *ProcCluster {
	t.Helper()
	requireBinary(t, "nats-server")
	if n < 3 {
		t.Fatalf("testnats: a JetStream cluster needs at least 3 servers, got %d", n)
	}
	ports, err := freePorts(3 * n)
	if err != nil {
		t.Fatalf("testnats: %v", err)
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[3*i+1])
	}
	c := &ProcCluster{t: t}
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	// Registered after the first t.TempDir, whose removal it therefore
	// precedes (cleanups run last first): a store removed under a running
	// server failed the test with "directory not empty" once the checks
	// had passed. Registered before the connections below, so that it
	// runs after they are closed.
	t.Cleanup(c.stop)
	for i, dir := range dirs {
		node := &ProcNode{
			t:        t,
			name:     fmt.Sprintf("n%d", i+1),
			port:     ports[3*i],
			httpPort: ports[3*i+2],
			dir:      dir,
		}
		node.args = append(node.serverArgs(),
			"--cluster_name", "sluice",
			"--cluster", routes[i],
			"--routes", strings.Join(routes, ","),
		)
		c.Nodes = append(c.Nodes, node)
	}
	for _, node := range c.Nodes {
		if err := node.start(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), procReadyWait)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c.nc, err = nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(procPoll))
	if err != nil {
		t.Fatalf("testnats: connect to %s: %v", c.URL(), err)
	}
	t.Cleanup(c.nc.Close)
	if c.js, err = jetstream.New(c.nc); err != nil {
		t.Fatalf("testnats: jetstream: %v", err)
	}
	if err := c.waitPlacement(ctx, n); err != nil {
		t.Fatal(err)
	}
	return c
}

// URL is every node's client URL, comma-separated, as nats.url takes
// them; a client connected to it moves to another node when one is
// killed.
func (c *ProcCluster) URL() string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL()
	}
	return strings.Join(urls, ",")
}

// Conn returns a new connection to the cluster that reconnects forever and
// is closed when the test ends.
func (c *ProcCluster) Conn() *nats.Conn {
	c.t.Helper()
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(procPoll))
	if err != nil {
		c.t.Fatalf("testnats: connect to %s: %v", c.URL(), err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// Node returns the node named name (n1, n2, ...), or nil.
func (c *ProcCluster) Node(name string) *ProcNode {
	for _, n := range c.Nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// StreamLeader returns the running node that leads stream, as the
// stream's info reports it, or nil when no leader answers within a few
// seconds (during an election, say) or the leader is not running.
func (c *ProcCluster) StreamLeader(stream string) *ProcNode {
	ctx, cancel := context.WithTimeout(context.Background(), procRequest)
	defer cancel()
	info, err := c.streamInfo(ctx, stream)
	if err != nil || info.Cluster == nil {
		return nil
	}
	n := c.Node(info.Cluster.Leader)
	if n == nil || !n.Running() {
		return nil
	}
	return n
}

// streamInfo asks the stream's leader for the stream's info.
func (c *ProcCluster) streamInfo(ctx context.Context, stream string) (*jetstream.StreamInfo, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("testnats: stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("testnats: info of stream %s: %w", stream, err)
	}
	return info, nil
}

// WaitReady waits until every running node's monitoring endpoint reports
// it healthy (/healthz: JetStream has a meta leader and the node is
// current with it and on its streams), or ctx ends.
func (c *ProcCluster) WaitReady(ctx context.Context) error {
	for {
		var last error
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			if err := n.healthy(ctx); err != nil {
				last = err
				break
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testnats: cluster not ready: %w (last: %v)", ctx.Err(), last)
		case <-time.After(procPoll):
		}
	}
}

// waitPlacement waits until a stream of n replicas can be placed: a meta
// leader that is current does not yet know that every peer runs
// JetStream, and a stream created then fails with "no suitable peers for
// placement".
func (c *ProcCluster) waitPlacement(ctx context.Context, n int) error {
	const probe = "testnats_placement_probe"
	for {
		one, cancel := context.WithTimeout(ctx, procRequest)
		_, err := c.js.CreateStream(one, jetstream.StreamConfig{Name: probe, Subjects: []string{probe}, Replicas: n})
		if err == nil {
			err = c.js.DeleteStream(one, probe)
			cancel()
			if err != nil {
				return fmt.Errorf("testnats: delete the placement probe: %w", err)
			}
			return nil
		}
		cancel()
		select {
		case <-ctx.Done():
			return fmt.Errorf("testnats: a stream of %d replicas cannot be placed: %w (last: %v)", n, ctx.Err(), err)
		case <-time.After(procPoll):
		}
	}
}

// stop kills every node.
func (c *ProcCluster) stop() {
	for _, n := range c.Nodes {
		n.kill()
	}
}

// Name is the node's server name (n1, n2, ...), as JetStream reports
// stream and consumer leaders and replicas.
func (n *ProcNode) Name() string { return n.name }

// String is the node's name.
func (n *ProcNode) String() string { return n.name }

// URL is the node's client URL (nats://127.0.0.1:port).
func (n *ProcNode) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// Running reports whether the node's process runs.
func (n *ProcNode) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Kill ends the node's process with SIGKILL, as a crash would, and
// returns once it has exited. Killing a node that is not running does
// nothing.
func (n *ProcNode) Kill() {
	n.t.Helper()
	n.kill()
}

// Restart starts the node's process again on the same ports and store
// directory, and returns once it accepts connections (it may not yet be
// current with the cluster: see ProcCluster.WaitReady). A running node is
// killed first.
func (n *ProcNode) Restart() {
	n.t.Helper()
	n.kill()
	if err := n.start(); err != nil {
		n.t.Fatal(err)
	}
}

// start starts the process and waits until it listens for clients. A
// port of a process killed just before may still be held for a moment,
// so a start whose process exits at once is tried again until
// procStartWait has passed.
func (n *ProcNode) start() error {
	deadline := time.Now().Add(procStartWait)
	for {
		err := n.startOnce(deadline)
		if err == nil || !errors.Is(err, errExited) || time.Now().After(deadline) {
			return err
		}
		// The process exited; its ports were probably still taken.
		time.Sleep(procPoll) // a pause before the next try, not a wait for a condition
	}
}

// errExited says that a nats-server process exited while starting.
var errExited = errors.New("exited while starting")

func (n *ProcNode) startOnce(deadline time.Time) error {
	cmd := exec.Command("nats-server", n.args...)
	cmd.Dir = n.dir
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testnats: start nats-server %s: %w", n.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	for {
		select {
		case <-done:
			return fmt.Errorf("testnats: nats-server %s on port %d %w (%s); log:\n%s", n.name, n.port, errExited, cmd.ProcessState, n.logTail())
		default:
		}
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", n.port), procPoll)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			n.kill()
			return fmt.Errorf("testnats: nats-server %s not listening on port %d after %s: %w; log:\n%s", n.name, n.port, procStartWait, err, n.logTail())
		}
		select {
		case <-done:
		case <-time.After(procPoll / 5):
		}
	}
}

// kill sends SIGKILL to the process, if running, and waits for its exit.
func (n *ProcNode) kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// serverArgs are the nats-server arguments of a node on its own: its
// ports on 127.0.0.1, its name, JetStream with its store, and its log,
// all in its directory.
func (n *ProcNode) serverArgs() []string {
	return []string{
		"--addr", "127.0.0.1",
		"--port", strconv.Itoa(n.port),
		"--server_name", n.name,
		"--http_port", strconv.Itoa(n.httpPort),
		"--jetstream",
		"--store_dir", filepath.Join(n.dir, "store"),
		"--log", filepath.Join(n.dir, "nats-server.log"),
	}
}

// healthy asks the node's monitoring endpoint /healthz whether it is
// healthy.
func (n *ProcNode) healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, procRequest)
	defer cancel()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", n.httpPort)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("testnats: %s healthz: %w", n.name, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("testnats: %s healthz: %w", n.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body [512]byte
		k, _ := resp.Body.Read(body[:])
		return fmt.Errorf("testnats: %s healthz: %s: %s", n.name, resp.Status, strings.TrimSpace(string(body[:k])))
	}
	return nil
}

// logTail is the end of the node's log file, for an error message.
func (n *ProcNode) logTail() string {
	b, err := os.ReadFile(filepath.Join(n.dir, "nats-server.log"))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const keep = 2000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(b)
}

// freePorts asks the kernel for k distinct free loopback ports.
func freePorts(k int) ([]int, error) {
	ports := make([]int, 0, k)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range k {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// requireBinary skips t unless the named binary is on the PATH.
func requireBinary(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("testnats: %s not on PATH (%v); this test needs a real nats-server (apt install nats-server)", name, err)
	}
}
