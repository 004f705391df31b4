package e2e_test

import (
	"io"
	"net"
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
type lagLink struct {
	ln       net.Listener
	upstream string
	lag      atomic.Int64 // nanoseconds

	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// newLagLink starts a link on a free loopback port in front of upstream,
// without lag until setLag, cut when the test ends.
func newLagLink(t *testing.T, upstream string) *lagLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("lag link: listen: %v", err)
	}
	l := &lagLink{ln: ln, upstream: upstream, done: make(chan struct{})}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.cut)
	return l
}

// setLag sets the delay of the data read from upstream from now on.
func (l *lagLink) setLag(d time.Duration) { l.lag.Store(int64(d)) }

// addr is the link's host:port.
func (l *lagLink) addr() string { return l.ln.Addr().String() }

// cut closes the link and every connection through it, dropping what it
// holds, and waits for its goroutines.
func (l *lagLink) cut() {
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
		l.conns = append(l.conns, down, up)
		l.mu.Unlock()
		chunks := make(chan chunk, 4096)
		l.wg.Add(3)
		go func() { defer l.wg.Done(); _, _ = io.Copy(up, down) }()
		go func() { defer l.wg.Done(); defer close(chunks); l.read(up, chunks) }()
		go func() { defer l.wg.Done(); l.write(down, chunks) }()
	}
}

// chunk is data read from upstream and when it is due downstream.
type chunk struct {
	b   []byte
	due time.Time
}

func (l *lagLink) read(up net.Conn, out chan<- chunk) {
	for {
		b := make([]byte, 32<<10)
		n, err := up.Read(b)
		if n > 0 {
			select {
			case out <- chunk{b[:n], time.Now().Add(time.Duration(l.lag.Load()))}:
			case <-l.done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *lagLink) write(down net.Conn, in <-chan chunk) {
	for c := range in {
		select {
		case <-time.After(time.Until(c.due)): // the lag itself
		case <-l.done:
			return
		}
		if _, err := down.Write(c.b); err != nil {
			return
		}
	}
}
