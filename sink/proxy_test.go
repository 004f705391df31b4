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
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// Through a proxy, a refusal at the write keeps the connection only where
// the request itself would have gone on it: over plain HTTP the proxy
// connection is kept and the next request reuses it; over HTTPS, where
// net/http runs TLS inside the proxy's tunnel, the refused write broke
// that TLS, so the tunnel is closed and the next request opens a new one.
// Either way the provider gets only the sends that passed.
func TestRefusalThroughAProxy(t *testing.T) {
	job := &queue.Job{ID: "j", Payload: json.RawMessage(`{"to":"+1"}`)}
	pass := WithGate(context.Background(), func() error { return nil })

	t.Run("http: the proxy connection is kept", func(t *testing.T) {
		var arrivals atomic.Int64
		prov := httptest.NewServer(counting(&arrivals))
		t.Cleanup(prov.Close)
		px := startProxy(t)
		h := newSink(t, HTTPConfig{URL: prov.URL + "/send"})
		px.use(h)
		refuse(t, h, job)
		if err := h.Send(pass, job); err != nil {
			t.Fatalf("send after a refusal: %v", err)
		}
		if n := arrivals.Load(); n != 1 {
			t.Errorf("the provider got %d requests, want 1 (the refused one never leaves)", n)
		}
		if n := px.conns.opened.Load(); n != 1 {
			t.Errorf("the proxy saw %d connections for a refusal and a send, want 1", n)
		}
	})

	t.Run("https: the tunnel is closed", func(t *testing.T) {
		var arrivals atomic.Int64
		prov := httptest.NewTLSServer(counting(&arrivals))
		t.Cleanup(prov.Close)
		px := startProxy(t)
		cfg := HTTPConfig{URL: prov.URL + "/send"}
		cfg.rootCAs = x509.NewCertPool()
		cfg.rootCAs.AddCert(prov.Certificate())
		h := newSink(t, cfg)
		h.rt.spares.age = time.Hour // a wrongly kept tunnel stays open
		px.use(h)
		if err := h.Send(refuseAtWrite(), job); !errors.Is(err, ErrLate) {
			t.Fatalf("send refused at write: got %v, want ErrLate", err)
		}
		eventually(t, 5*time.Second, func() bool { return px.tunnelsClosed.Load() == 1 }, "the refused request's tunnel is closed")
		if n := spareCount(h); n != 0 {
			t.Errorf("%d connections kept after a refusal inside a tunnel, want 0", n)
		}
		if err := h.Send(pass, job); err != nil {
			t.Fatalf("send after a refusal: %v", err)
		}
		if n := arrivals.Load(); n != 1 {
			t.Errorf("the provider got %d requests, want 1 (the refused one never leaves)", n)
		}
		if n := px.tunnels.Load(); n != 2 {
			t.Errorf("the proxy opened %d tunnels, want 2 (the refused one is not reused)", n)
		}
	})
}

// counting is a provider that reads each request and counts it in n.
func counting(n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		n.Add(1)
	})
}

// proxy is a forward proxy on loopback: CONNECT tunnels for HTTPS, and
// plain requests for HTTP passed on to their absolute URL.
type proxy struct {
	srv                    *httptest.Server
	conns                  connCounter  // client connections the proxy accepted
	tunnels, tunnelsClosed atomic.Int64 // CONNECT tunnels opened, and closed by the client
	mu                     sync.Mutex
	open                   []net.Conn // both ends of every tunnel, closed at cleanup
	wg                     sync.WaitGroup
}

// startProxy starts a proxy that stops with the test.
func startProxy(t *testing.T) *proxy {
	t.Helper()
	p := &proxy{}
	fwd := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: "http", Host: r.In.URL.Host})
	}}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			fwd.ServeHTTP(w, r)
			return
		}
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			_ = up.Close()
			return
		}
		p.tunnel(c, brw.Reader, up)
	}))
	p.srv.Config.ConnState = p.conns.track
	p.srv.Start()
	t.Cleanup(func() {
		p.srv.Close()
		p.mu.Lock()
		for _, c := range p.open {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// tunnel answers a CONNECT on c and copies both ways between c (whose
// buffered reader is in) and up, until the client closes c.
func (p *proxy) tunnel(c net.Conn, in *bufio.Reader, up net.Conn) {
	p.tunnels.Add(1)
	p.mu.Lock()
	p.open = append(p.open, c, up)
	p.mu.Unlock()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_, _ = c.Close(), up.Close()
		return
	}
	p.wg.Go(func() {
		_, _ = io.Copy(up, in)
		p.tunnelsClosed.Add(1)
		_, _ = c.Close(), up.Close()
	})
	p.wg.Go(func() { _, _ = io.Copy(c, up) })
}

// use makes h send through p.
func (p *proxy) use(h *HTTP) {
	u, _ := url.Parse(p.srv.URL)
	h.rt.next.(*direct).via.Proxy = http.ProxyURL(u)
}
