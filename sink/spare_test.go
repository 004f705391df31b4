package sink

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// A request refused at its write leaves its connection to the provider
// open for the next request: nothing of it was written, so the connection
// is as clean as an idle one, and closing it (as net/http does after a
// failed write) would cost a new connection, over TLS a handshake, for
// every refusal. Over plain HTTP and HTTPS, a refusal on a reused
// connection and on a new one, then a send: one connection in all, and
// the provider gets only the sends that passed.
func TestRefusalKeepsTheConnection(t *testing.T) {
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			var arrivals atomic.Int64
			var cc connCounter
			srv := httptest.NewUnstartedServer(counting(&arrivals))
			srv.Config.ConnState = cc.track
			var cfg HTTPConfig
			if scheme == "https" {
				srv.StartTLS()
				cfg.rootCAs = x509.NewCertPool()
				cfg.rootCAs.AddCert(srv.Certificate())
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			cfg.URL = srv.URL + "/send"
			h := newSink(t, cfg)
			job := &queue.Job{ID: "j", Payload: json.RawMessage(`{"to":"+1"}`)}
			pass := WithGate(context.Background(), func() error { return nil })
			for i, step := range []string{"refuse", "send", "refuse", "refuse", "send", "send"} {
				before := arrivals.Load()
				if step == "refuse" {
					refuse(t, h, job)
					if n := arrivals.Load() - before; n != 0 {
						t.Fatalf("step %d: the provider got %d requests for a refused send, want 0", i, n)
					}
					continue
				}
				if err := h.Send(pass, job); err != nil {
					t.Fatalf("step %d: send: %v", i, err)
				}
				if n := arrivals.Load() - before; n != 1 {
					t.Fatalf("step %d: the provider got %d requests for one send, want 1", i, n)
				}
			}
			if n := cc.opened.Load(); n != 1 {
				t.Errorf("the provider saw %d connections for 3 sends and 3 refusals, want 1", n)
			}
		})
	}
}

// spareCount is how many connections h keeps for the next dial.
func spareCount(h *HTTP) int {
	s := h.rt.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lenLocked()
}

// keptSockets returns the sockets of the connections h keeps for its next
// requests: the idle ones of its own transport, and the spares net/http's
// transport dials from.
func keptSockets(h *HTTP) []net.Conn {
	gt := h.rt
	var out []net.Conn
	d := gt.next.(*direct)
	d.mu.Lock()
	for _, l := range d.idle {
		for _, pc := range l {
			out = append(out, socket(pc.c))
		}
	}
	d.mu.Unlock()
	gt.spares.mu.Lock()
	for _, l := range gt.spares.idle {
		for _, sp := range l {
			out = append(out, socket(sp.c))
		}
	}
	gt.spares.mu.Unlock()
	return out
}

// refuse sends job on a gate that refuses it at its write, and waits
// until h keeps the connection: net/http's transport (through a proxy)
// hands the refusal back before it closes the connection (which keeps it),
// so a send right after could otherwise dial before the connection is
// kept.
func refuse(t *testing.T, h *HTTP, job *queue.Job) {
	t.Helper()
	if err := h.Send(refuseAtWrite(), job); !errors.Is(err, ErrLate) {
		t.Fatalf("send refused at write: got %v, want ErrLate", err)
	}
	eventually(t, 5*time.Second, func() bool { return len(keptSockets(h)) == 1 }, "the refused send's connection is kept")
}

// connCounter counts the connections a test server opens and closes.
type connCounter struct{ opened, closed atomic.Int64 }

func (c *connCounter) track(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		c.opened.Add(1)
	case http.StateClosed, http.StateHijacked:
		c.closed.Add(1)
	}
}

// refuseAtWrite passes the gate's first run (the hand-over to the
// transport) and refuses the next (the write), as a slot that expires
// while its request waits for a connection would.
func refuseAtWrite() context.Context {
	var runs atomic.Int64
	return WithGate(context.Background(), func() error {
		if runs.Add(1) == 1 {
			return nil
		}
		return ErrLate
	})
}

// A kept connection that the server has closed meanwhile is not handed
// out: the next send opens a new one and goes through (a request is
// written at most once, so a dead connection would fail the send). A
// spare (a refused request's connection that net/http's transport closed,
// through a proxy) is closed after its time, and every kept connection
// when the sink is closed: none is left open on the provider.
func TestSparesAreLiveAndBounded(t *testing.T) {
	var cc connCounter
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
	}))
	srv.Config.ConnState = cc.track
	srv.Start()
	t.Cleanup(srv.Close)
	job := &queue.Job{ID: "j", Payload: json.RawMessage(`{"to":"+1"}`)}
	pass := WithGate(context.Background(), func() error { return nil })

	t.Run("closed by the server", func(t *testing.T) {
		h := newSink(t, HTTPConfig{URL: srv.URL + "/send"})
		before := cc.opened.Load()
		refuse(t, h, job)
		// The client's connect returns before the server accepts: until
		// it has, CloseClientConnections does not know the connection,
		// and a late accept would count in the send's connections.
		opened := before + 1
		eventually(t, 5*time.Second, func() bool { return cc.opened.Load() == opened }, "the server accepts the refused send's connection")
		srv.CloseClientConnections()
		eventually(t, 5*time.Second, func() bool {
			kept := keptSockets(h)
			if len(kept) != 1 {
				t.Fatal("the kept connection went before the server closed it")
			}
			return !alive(kept[0])
		}, "the server's close reaches the kept connection")
		if err := h.Send(pass, job); err != nil {
			t.Fatalf("send after the server closed the kept connection: %v", err)
		}
		if n := cc.opened.Load() - opened; n != 1 {
			t.Errorf("the send opened %d connections, want 1 (the kept one was closed)", n)
		}
	})

	t.Run("a spare kept for a while", func(t *testing.T) {
		h := newSink(t, HTTPConfig{URL: srv.URL + "/send"})
		px := startProxy(t)
		px.use(h)
		h.rt.spares.age = 200 * time.Millisecond
		refuse(t, h, job)
		if n := spareCount(h); n != 1 {
			t.Fatalf("%d spares after a refusal through a proxy, want 1", n)
		}
		eventually(t, 5*time.Second, func() bool { return spareCount(h) == 0 }, "the spare is closed after its time")
		eventually(t, 5*time.Second, func() bool { return px.conns.opened.Load() == px.conns.closed.Load() }, "the proxy sees every connection closed")
	})

	t.Run("closed with the sink", func(t *testing.T) {
		h, err := NewHTTP(HTTPConfig{URL: srv.URL + "/send"})
		if err != nil {
			t.Fatal(err)
		}
		px := startProxy(t)
		for range 3 {
			refuse(t, h, job) // kept by the sink's own transport
		}
		px.use(h)
		if err := h.Send(refuseAtWrite(), job); !errors.Is(err, ErrLate) { // a spare
			t.Fatalf("send refused at write: got %v, want ErrLate", err)
		}
		eventually(t, 5*time.Second, func() bool { return len(keptSockets(h)) == 2 }, "both connections are kept")
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if n := len(keptSockets(h)); n != 0 {
			t.Errorf("%d connections kept after Close, want 0", n)
		}
		eventually(t, 5*time.Second, func() bool { return cc.opened.Load() == cc.closed.Load() }, "the provider sees every connection closed")
		eventually(t, 5*time.Second, func() bool { return px.conns.opened.Load() == px.conns.closed.Load() }, "the proxy sees every connection closed")
	})
}
