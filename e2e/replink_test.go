package e2e_test

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// replLink is a TCP proxy in front of a Redis Cluster node that the node
// announces as its address (testredis.ClusterOptions.Link), so that its
// clients and its replicas all connect through it. It delays what the
// node sends by lag on replication connections alone, and drops what it
// still holds when cut: a master whose last writes die with its host.
//
// Why a proxy for every connection rather than one for the replica only:
// a cluster replica replicates from the address its master announces on
// the cluster bus (REPLICAOF is refused in cluster mode, and CLUSTER
// REPLICATE takes a node id, not an address), so the replica can only be
// sent through a proxy by having the master announce it, and then every
// client comes through it too. A connection is a replica's once it sends
// REPLCONF, PSYNC or SYNC among its first commands (a replica's handshake
// is PING, [AUTH,] REPLCONF listening-port, REPLCONF capa, PSYNC); a
// client never sends those, so clients pass at once.
type replLink struct {
	ln       net.Listener
	upstream string
	lag      atomic.Int64 // nanoseconds
	repl     atomic.Int64 // replication connections seen

	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// replSniff is how much of a connection's first bytes is searched for a
// replication command.
const replSniff = 4 << 10

// replCommands are the RESP bulk strings that name a replication
// command (upper case; the search ignores case).
var replCommands = [][]byte{[]byte("$8\r\nREPLCONF\r\n"), []byte("$5\r\nPSYNC\r\n"), []byte("$4\r\nSYNC\r\n")}

// newReplLink starts a link on a free loopback port in front of upstream,
// without lag until setLag, cut when the test ends.
func newReplLink(t *testing.T, upstream string) *replLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("replication link: listen: %v", err)
	}
	l := &replLink{ln: ln, upstream: upstream, done: make(chan struct{})}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.cut)
	return l
}

// setLag sets the delay of what upstream sends to replicas from now on.
func (l *replLink) setLag(d time.Duration) { l.lag.Store(int64(d)) }

// addr is the link's host:port.
func (l *replLink) addr() string { return l.ln.Addr().String() }

// replicas returns how many replication connections came through.
func (l *replLink) replicas() int { return int(l.repl.Load()) }

// cut closes the link and every connection through it, dropping what it
// holds, and waits for its goroutines.
func (l *replLink) cut() {
	l.once.Do(func() {
		close(l.done)
		_ = l.ln.Close()
		l.mu.Lock()
		for _, c := range l.conns {
			_ = c.Close()
		}
		l.mu.Unlock()
	})
	l.wg.Wait()
}

func (l *replLink) accept() {
	defer l.wg.Done()
	for {
		down, err := l.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", l.upstream, 2*time.Second)
		if err != nil {
			_ = down.Close()
			continue
		}
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			_ = down.Close()
			_ = up.Close()
			return
		default:
		}
		l.conns = append(l.conns, down, up)
		l.mu.Unlock()
		var repl atomic.Bool
		chunks := make(chan chunk, 4096)
		l.wg.Add(3)
		go func() { defer l.wg.Done(); defer up.Close(); l.forward(up, down, &repl) }()
		go func() { defer l.wg.Done(); defer close(chunks); l.read(up, chunks, &repl) }()
		go func() { defer l.wg.Done(); defer down.Close(); l.write(down, chunks) }()
	}
}

// forward copies what the client sends upstream, undelayed, and marks the
// connection a replica's when its first bytes hold a replication command.
func (l *replLink) forward(up, down net.Conn, repl *atomic.Bool) {
	var head []byte
	b := make([]byte, 32<<10)
	for {
		n, err := down.Read(b)
		if n > 0 {
			if !repl.Load() && len(head) < replSniff {
				head = append(head, bytes.ToUpper(b[:min(n, replSniff)])...)
				for _, c := range replCommands {
					if bytes.Contains(head, c) {
						repl.Store(true)
						l.repl.Add(1)
						break
					}
				}
			}
			if _, werr := up.Write(b[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// read takes what upstream sends and stamps when it is due downstream:
// lag later on a replication connection, at once otherwise.
func (l *replLink) read(up net.Conn, out chan<- chunk, repl *atomic.Bool) {
	for {
		b := make([]byte, 32<<10)
		n, err := up.Read(b)
		if n > 0 {
			due := time.Now()
			if repl.Load() {
				due = due.Add(time.Duration(l.lag.Load()))
			}
			select {
			case out <- chunk{b[:n], due}:
			case <-l.done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// write delivers the chunks downstream when due, and stops, dropping the
// rest, when the link is cut.
func (l *replLink) write(down net.Conn, in <-chan chunk) {
	for c := range in {
		if d := time.Until(c.due); d > 0 {
			select {
			case <-time.After(d): // the lag itself
			case <-l.done:
				return
			}
		}
		if _, err := down.Write(c.b); err != nil {
			return
		}
	}
}
