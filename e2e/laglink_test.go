package e2e_test

import (
	"bytes"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lagLink is a TCP proxy that delivers what the upstream sends lag late
// (the other way is not delayed), and drops what it still holds when cut:
// a replication link whose last writes die with the master's host.
// (toxiproxy's latency toxic cannot be cut while it holds data: its
// goroutine then blocks for good.)
//
// A link made by newReplLink delays only replication connections: it
// stands in front of a Redis Cluster node that announces the link as its
// address (testredis.ClusterOptions.Link), so that its clients and its
// replicas all connect through it. Why a proxy for every connection
// rather than one for the replica only: a cluster replica replicates from
// the address its master announces on the cluster bus (REPLICAOF is
// refused in cluster mode, and CLUSTER REPLICATE takes a node id, not an
// address), so the replica can only be sent through a proxy by having the
// master announce it, and then every client comes through it too. A
// connection is a replica's once it sends REPLCONF, PSYNC or SYNC among
// its first commands (a replica's handshake is PING, [AUTH,] REPLCONF
// listening-port, REPLCONF capa, PSYNC); a client never sends those, so
// clients pass at once.
type lagLink struct {
	ln       net.Listener
	upstream string
	lag      atomic.Int64 // nanoseconds
	onlyRepl bool         // delay replication connections only (newReplLink)
	repl     atomic.Int64 // replication connections seen, with onlyRepl

	mu    sync.Mutex
	conns []net.Conn
	pipes []*pipe
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	atCut []pipeStats // the pipes as cut left them
}

// pipe counts what one connection through the link carried downstream:
// what it read, what it delivered, what it holds and how late.
type pipe struct {
	accepted time.Time

	mu      sync.Mutex
	in, out int64       // bytes read from upstream, written downstream
	held    []time.Time // when each chunk not yet written was read
	maxLate time.Duration
}

// pipeStats is a pipe's counts at one moment.
type pipeStats struct {
	Accepted time.Time
	In, Out  int64
	// Oldest is when the oldest chunk still held was read; zero when
	// the pipe holds nothing.
	Oldest time.Time
	// MaxLate is the most a chunk was delivered after it was due (the
	// link's own lateness, beyond the lag).
	MaxLate time.Duration
}

func (p *pipe) stats() pipeStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := pipeStats{Accepted: p.accepted, In: p.in, Out: p.out, MaxLate: p.maxLate}
	if len(p.held) > 0 {
		st.Oldest = p.held[0]
	}
	return st
}

// stats returns each connection's counts, in the order they were
// accepted: more than one means the replica reconnected (and resynced).
func (l *lagLink) stats() []pipeStats {
	l.mu.Lock()
	pipes := slices.Clone(l.pipes)
	l.mu.Unlock()
	out := make([]pipeStats, len(pipes))
	for i, p := range pipes {
		out[i] = p.stats()
	}
	return out
}

// cutStats returns the counts as the first cut left them: what each
// connection held (In - Out bytes, read since Oldest) was dropped.
func (l *lagLink) cutStats() []pipeStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.atCut
}

// newLagLink starts a link on a free loopback port in front of upstream,
// without lag until setLag, cut when the test ends.
func newLagLink(t *testing.T, upstream string) *lagLink {
	t.Helper()
	return startLagLink(t, upstream, false)
}

// newReplLink is newLagLink delaying replication connections only.
func newReplLink(t *testing.T, upstream string) *lagLink {
	t.Helper()
	return startLagLink(t, upstream, true)
}

func startLagLink(t *testing.T, upstream string, onlyRepl bool) *lagLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("lag link: listen: %v", err)
	}
	l := &lagLink{ln: ln, upstream: upstream, onlyRepl: onlyRepl, done: make(chan struct{})}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.cut)
	return l
}

// replicas returns how many replication connections came through a link
// made by newReplLink.
func (l *lagLink) replicas() int { return int(l.repl.Load()) }

// replSniff is how much of a connection's first bytes is searched for a
// replication command.
const replSniff = 4 << 10

// replCommands are the RESP bulk strings that name a replication
// command (upper case; the search ignores case).
var replCommands = [][]byte{[]byte("$8\r\nREPLCONF\r\n"), []byte("$5\r\nPSYNC\r\n"), []byte("$4\r\nSYNC\r\n")}

// forward copies what the client sends upstream, undelayed; with
// onlyRepl it marks the connection a replica's when its first bytes hold
// a replication command.
func (l *lagLink) forward(up, down net.Conn, repl *atomic.Bool) {
	if !l.onlyRepl {
		_, _ = io.Copy(up, down)
		return
	}
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

// setLag sets the delay of the data read from upstream from now on.
func (l *lagLink) setLag(d time.Duration) { l.lag.Store(int64(d)) }

// addr is the link's host:port.
func (l *lagLink) addr() string { return l.ln.Addr().String() }

// cut closes the link and every connection through it, dropping what it
// holds, and waits for its goroutines.
func (l *lagLink) cut() {
	l.once.Do(func() {
		atCut := l.stats()
		l.mu.Lock()
		l.atCut = atCut
		l.mu.Unlock()
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

func (l *lagLink) accept() {
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
		p := &pipe{accepted: time.Now()}
		l.conns = append(l.conns, down, up)
		l.pipes = append(l.pipes, p)
		l.mu.Unlock()
		chunks := make(chan chunk, 4096)
		var repl atomic.Bool
		l.wg.Add(3)
		go func() { defer l.wg.Done(); l.forward(up, down, &repl) }()
		go func() { defer l.wg.Done(); defer close(chunks); l.read(up, p, chunks, &repl) }()
		go func() { defer l.wg.Done(); l.write(down, p, chunks) }()
	}
}

// chunk is data read from upstream and when it is due downstream.
type chunk struct {
	b   []byte
	due time.Time
}

// read takes what upstream sends and stamps when it is due downstream:
// lag later (with onlyRepl, on a replication connection only).
func (l *lagLink) read(up net.Conn, p *pipe, out chan<- chunk, repl *atomic.Bool) {
	for {
		b := make([]byte, 32<<10)
		n, err := up.Read(b)
		if n > 0 {
			now := time.Now()
			p.mu.Lock()
			p.in += int64(n)
			p.held = append(p.held, now)
			p.mu.Unlock()
			due := now
			if !l.onlyRepl || repl.Load() {
				due = now.Add(time.Duration(l.lag.Load()))
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

func (l *lagLink) write(down net.Conn, p *pipe, in <-chan chunk) {
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
		late := time.Since(c.due)
		p.mu.Lock()
		p.out += int64(len(c.b))
		p.held = p.held[1:]
		p.maxLate = max(p.maxLate, late)
		p.mu.Unlock()
	}
}
