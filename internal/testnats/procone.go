package testnats

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/poll"
)

// StartProc starts one standalone nats-server process with JetStream, as
// a user runs it beside the dispatchers: on free 127.0.0.1 ports (client
// and monitoring), its store in a temporary directory. It waits until the
// server reports itself healthy and kills the process when the test ends.
// It skips t when nats-server is not on the PATH.
func StartProc(t testing.TB) *ProcNode {
	t.Helper()
	requireBinary(t, "nats-server")
	ports, err := freePorts(2)
	if err != nil {
		t.Fatalf("testnats: %v", err)
	}
	dir := t.TempDir()
	n := &ProcNode{t: t, name: "n1", port: ports[0], httpPort: ports[1], dir: dir}
	n.args = n.serverArgs()
	t.Cleanup(n.kill)
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, procReadyWait, procPoll, fmt.Sprintf("nats-server %s healthy (log: %s)", n.name, filepath.Join(dir, "nats-server.log")),
		func() bool { return n.healthy(context.Background()) == nil })
	return n
}

// PID is the process id of the node's server, or 0 when none runs.
func (n *ProcNode) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// MonitorURL is the node's monitoring endpoint, such as
// http://127.0.0.1:8222 (its /varz, /healthz, ...).
func (n *ProcNode) MonitorURL() string { return fmt.Sprintf("http://127.0.0.1:%d", n.httpPort) }
