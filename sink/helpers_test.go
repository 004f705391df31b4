package sink

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// provider is a test HTTP server on 127.0.0.1 that counts the connections
// opened to it and the requests in flight, and answers with handle.
type provider struct {
	*httptest.Server
	done     chan struct{} // closed when the test ends, to free blocked handlers
	newConns atomic.Int64
	inFlight atomic.Int64
	maxSeen  atomic.Int64

	mu     sync.Mutex
	handle http.HandlerFunc
}

func newProvider(t testing.TB, handle http.HandlerFunc) *provider {
	t.Helper()
	p := &provider{done: make(chan struct{}), handle: handle}
	p.Server = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			p.newConns.Add(1)
		}
	}
	p.Start()
	t.Cleanup(p.Close)
	t.Cleanup(func() { close(p.done) }) // runs first: unblocks handlers before Close waits for them
	return p
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	n := p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	for {
		m := p.maxSeen.Load()
		if n <= m || p.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	p.mu.Lock()
	h := p.handle
	p.mu.Unlock()
	h(w, r)
}

func (p *provider) setHandler(h http.HandlerFunc) {
	p.mu.Lock()
	p.handle = h
	p.mu.Unlock()
}

// newSink returns an HTTP sink for cfg, closed when the test ends.
func newSink(t testing.TB, cfg HTTPConfig) *HTTP {
	t.Helper()
	h, err := NewHTTP(cfg)
	if err != nil {
		t.Fatalf("NewHTTP: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// answer returns a handler that drains the request and answers status,
// with the headers given as name, value pairs (an empty value: none, not
// even the one the server would add), and body.
func answer(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for i := 0; i+1 < len(headers); i += 2 {
			if headers[i+1] == "" { // none, not even the server's own (Date)
				w.Header()[headers[i]] = nil
				continue
			}
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// eventually polls cond every few milliseconds until it holds, failing the
// test if it still does not after timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	poll.Until(t, timeout, 2*time.Millisecond, what, cond)
}

// holdsFor checks that cond stays true for the whole of window, polling it.
// It is an assertion that something does not happen, not a synchronisation.
func holdsFor(t *testing.T, window time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(window)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("%s: became false within %s", what, window)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
