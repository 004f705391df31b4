package sink

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

func directJob(id string) *queue.Job {
	return &queue.Job{ID: id, Payload: json.RawMessage(`{"to":"+1"}`)}
}

// A request that goes through no proxy is written and its answer read on
// the caller's goroutine: while the provider holds one, and once it is
// answered, no goroutine of net/http's transport runs for it (net/http
// keeps a read and a write goroutine per connection, idle ones too).
func TestSendRunsOnTheCallersGoroutine(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	h := newSink(t, HTTPConfig{URL: p.URL})
	done := make(chan error, 1)
	go func() { done <- h.Send(context.Background(), directJob("a")) }()
	<-arrived
	if n := transportGoroutines(); n != 0 {
		t.Errorf("while a request is at the provider: %d goroutines of net/http's transport, want 0", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := transportGoroutines(); n != 0 {
		t.Errorf("with the connection idle: %d goroutines of net/http's transport, want 0", n)
	}
}

// transportGoroutines counts the goroutines running net/http's client
// connection loops.
func transportGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "net/http.(*persistConn).")
}

// rawProvider is a provider on 127.0.0.1 that answers each request with
// the bytes answer returns for it (the nth request it got, from 0), then
// closes the connection when answer says so. It counts the connections,
// those it closed, and the requests.
type rawProvider struct {
	ln       net.Listener
	conns    atomic.Int64
	closed   atomic.Int64
	requests atomic.Int64
}

func newRawProvider(t *testing.T, answer func(n int) (reply string, hangUp bool)) *rawProvider {
	t.Helper()
	p := &rawProvider{}
	p.ln = listen(t, func(c net.Conn) {
		p.conns.Add(1)
		go p.serve(c, answer)
	})
	return p
}

// listen hands each connection to a free port of 127.0.0.1 to handle, in
// turn, until t ends.
func listen(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	}()
	return ln
}

func (p *rawProvider) serve(c net.Conn, answer func(n int) (string, bool)) {
	defer func() { _ = c.Close(); p.closed.Add(1) }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		reply, hangUp := answer(int(p.requests.Add(1) - 1))
		if _, err := io.WriteString(c, reply); err != nil || hangUp {
			return
		}
	}
}

func (p *rawProvider) url() string { return "http://" + p.ln.Addr().String() + "/send" }

const ok200 = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// The connections the sink keeps are reused only while the provider lets
// them be: one the provider closed while idle is not written on (the send
// goes on a new one, and the provider gets it once); an answer that says
// Connection: close, or whose body is longer than the sink drains, ends
// its connection; a 1xx interim answer is read past.
func TestDirectConnectionReuse(t *testing.T) {
	cases := []struct {
		name      string
		answer    func(n int) (string, bool)
		hangsUp   bool
		wantConns int64
	}{
		{"kept alive", func(int) (string, bool) { return ok200, false }, false, 1},
		{"closed by the provider while idle", func(int) (string, bool) { return ok200, true }, true, 3},
		{"Connection: close", func(int) (string, bool) {
			return "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false
		}, false, 3},
		{"HTTP/1.0 without keep-alive", func(int) (string, bool) {
			return "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", false
		}, false, 3},
		{"a body longer than the sink drains", func(int) (string, bool) {
			return "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 100000), false
		}, false, 3},
		{"100 Continue first", func(int) (string, bool) {
			return "HTTP/1.1 100 Continue\r\n\r\n" + ok200, false
		}, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newRawProvider(t, tc.answer)
			h := newSink(t, HTTPConfig{URL: p.url()})
			for i := range 3 {
				if err := h.Send(context.Background(), directJob("j")); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				// A connection the provider hangs up on is closed before
				// the next send: the sink finds it closed while idle. (One
				// it closes while the next request is on its way fails that
				// send: the request is not written a second time.)
				if tc.hangsUp {
					eventually(t, 5*time.Second, func() bool { return p.closed.Load() == p.conns.Load() },
						"the provider closed the connection")
				}
			}
			if n := p.requests.Load(); n != 3 {
				t.Errorf("the provider got %d requests for 3 sends, want 3", n)
			}
			if n := p.conns.Load(); n != tc.wantConns {
				t.Errorf("connections for 3 sends: %d, want %d", n, tc.wantConns)
			}
		})
	}
}

// An answer that is not HTTP, or that stops halfway, fails the send as
// transient, and the connection is not reused.
func TestDirectBrokenAnswer(t *testing.T) {
	for _, reply := range []string{
		"garbage\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok",
	} {
		p := newRawProvider(t, func(n int) (string, bool) {
			if n == 0 {
				return reply, true
			}
			return ok200, false
		})
		h := newSink(t, HTTPConfig{URL: p.url()})
		err := h.Send(context.Background(), directJob("a"))
		if reply == "garbage\r\n\r\n" && !errors.Is(err, ErrTransient) {
			t.Errorf("a garbled answer: got %v, want a transient error", err)
		}
		if err := h.Send(context.Background(), directJob("b")); err != nil {
			t.Errorf("the send after %q: %v", reply, err)
		}
		if n := p.conns.Load(); n != 2 {
			t.Errorf("after %q: %d connections for 2 sends, want 2", reply, n)
		}
	}
}

// Over HTTPS the sink's own TLS connection is kept and reused as a plain
// one is.
func TestDirectReusesTLSConnections(t *testing.T) {
	var conns atomic.Int64
	prov := httptest.NewUnstartedServer(answer(200, "ok"))
	prov.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	prov.StartTLS()
	t.Cleanup(prov.Close)
	cfg := HTTPConfig{URL: prov.URL + "/send"}
	cfg.rootCAs = x509.NewCertPool()
	cfg.rootCAs.AddCert(prov.Certificate())
	h := newSink(t, cfg)
	for i := range 20 {
		if err := h.Send(context.Background(), directJob("j")); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("TLS connections for 20 sequential sends: %d, want 1", n)
	}
}

// A request the gate refused at its write leaves its connection in the
// sink's pool as if it had never taken it: kept as long as any idle
// connection (not a spare's two seconds), and the next send goes on it.
func TestRefusalLeavesTheConnectionInThePool(t *testing.T) {
	p := newProvider(t, answer(200, "ok"))
	h := newSink(t, HTTPConfig{URL: p.URL})
	h.rt.spares.age = time.Nanosecond // a spare would be closed at once
	pass := WithGate(context.Background(), func() error { return nil })
	for i, step := range []string{"refuse", "send", "refuse", "refuse", "send"} {
		if step == "refuse" {
			refuse(t, h, directJob("j"))
			continue
		}
		if err := h.Send(pass, directJob("j")); err != nil {
			t.Fatalf("step %d: send: %v", i, err)
		}
	}
	if n := p.newConns.Load(); n != 1 {
		t.Errorf("the provider saw %d connections for 2 sends and 3 refusals, want 1", n)
	}
	if n := spareCount(h); n != 0 {
		t.Errorf("%d spares, want 0: the sink's own transport keeps a refused request's connection", n)
	}
}

// A request larger than the sink writes before it reads the answer
// (maxSoloWrite), taken whole by the provider, leaves its connection for
// the next one.
func TestDirectLargeBodyKeepsTheConnection(t *testing.T) {
	p := newRawProvider(t, func(int) (string, bool) { return ok200, false })
	h := newSink(t, HTTPConfig{URL: p.url()})
	big := &queue.Job{ID: "big", Payload: json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)}
	for i := range 3 {
		if err := h.Send(context.Background(), big); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if n := p.requests.Load(); n != 3 {
		t.Errorf("the provider got %d requests for 3 sends, want 3", n)
	}
	if n := p.conns.Load(); n != 1 {
		t.Errorf("connections for 3 sends of 1 MiB: %d, want 1", n)
	}
}

// A provider may answer before it has read a large request's body (a 429
// or a 413 as soon as it has the head), then close the connection with
// the body unread (the kernel resets it) or hold it without reading on.
// Its answer is what the send returns, not the write that the reset cut
// short or that waits on a full window until the send's time is out.
func TestEarlyAnswerToALargeBody(t *testing.T) {
	cases := []struct {
		name, answer string
		hold         bool
		want         func(error) bool
	}{
		{"closed with the body unread", "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false,
			func(err error) bool { return errors.Is(err, ErrThrottled) && RetryAfter(err) == 7*time.Second }},
		{"held without reading", "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n", true,
			func(err error) bool { return errors.Is(err, ErrPermanent) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stop := make(chan struct{})
			ln := listen(t, func(c net.Conn) {
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					_, _ = io.WriteString(c, tc.answer)
				}
				if tc.hold {
					<-stop
				}
				_ = c.Close()
			})
			t.Cleanup(func() { close(stop) }) // before listen's, which waits for this handler
			h := newSink(t, HTTPConfig{URL: "http://" + ln.Addr().String() + "/send"})
			big := &queue.Job{ID: "big", Payload: json.RawMessage(`"` + strings.Repeat("x", 8<<20) + `"`)}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := h.Send(ctx, big); !tc.want(err) {
				t.Fatalf("send of an 8 MiB body answered before it was read: got %v, want the provider's answer", err)
			}
		})
	}
}
