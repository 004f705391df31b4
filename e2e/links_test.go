package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// redisLink is a TCP proxy between one replica and Redis (toxiproxy, in
// the test process), to slow or cut that replica's link alone.
type redisLink struct {
	t     *testing.T
	proxy *toxiproxy.Proxy
}

// newRedisLink starts a proxy on a free loopback port in front of the
// Redis at upstream, stopped when the test ends.
func newRedisLink(t *testing.T, upstream string) *redisLink {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "redis-"+t.Name(), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("redis link: start proxy: %v", err)
	}
	t.Cleanup(p.Stop)
	return &redisLink{t: t, proxy: p}
}

// url is the Redis URL a replica behind the link dials.
func (l *redisLink) url() string { return "redis://" + l.proxy.Listen + "/0" }

// delay makes Redis's replies to the replica latency ± jitter late, in
// place of any delay set before.
func (l *redisLink) delay(latency, jitter time.Duration) {
	l.t.Helper()
	tc := l.proxy.Toxics
	if err := tc.RemoveToxic(context.Background(), "delay"); err != nil && !errors.Is(err, toxiproxy.ErrToxicNotFound) {
		l.t.Fatalf("redis link: remove delay: %v", err)
	}
	body := fmt.Sprintf(`{"name":"delay","type":"latency","stream":"downstream","attributes":{"latency":%d,"jitter":%d}}`,
		latency.Milliseconds(), jitter.Milliseconds())
	if _, err := tc.AddToxicJson(strings.NewReader(body)); err != nil {
		l.t.Fatalf("redis link: add delay: %v", err)
	}
}

// cut closes the proxy's listener and every connection through it: the
// replica's calls to Redis fail until restore. It returns once nothing can
// pass any more.
func (l *redisLink) cut() {
	l.t.Helper()
	if err := l.proxy.Update(&toxiproxy.Proxy{Listen: l.proxy.Listen, Upstream: l.proxy.Upstream, Enabled: false}); err != nil {
		l.t.Fatalf("redis link: cut: %v", err)
	}
}

// restore listens again on the same port.
func (l *redisLink) restore() {
	l.t.Helper()
	if err := l.proxy.Update(&toxiproxy.Proxy{Listen: l.proxy.Listen, Upstream: l.proxy.Upstream, Enabled: true}); err != nil {
		l.t.Fatalf("redis link: restore: %v", err)
	}
}

// senders tells which replica sent each request: every replica gets a
// sink URL of its own, a listener that notes the replica against the job
// and attempt and hands the request to the one provider, which stamps the
// arrival time as usual.
type senders struct {
	prov *mockprovider.Provider
	mu   sync.Mutex
	by   map[string]string // job id + "#" + attempt -> replica
}

func newSenders(prov *mockprovider.Provider) *senders {
	return &senders{prov: prov, by: map[string]string{}}
}

func sendKey(job string, attempt int) string { return job + "#" + strconv.Itoa(attempt) }

// sinkURL starts a listener for replica, closed when the test ends, and
// returns the sink URL that replica is to use.
func (s *senders) sinkURL(t *testing.T, replica string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("senders: listen: %v", err)
	}
	h := s.prov.Handler()
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(mockprovider.HeaderJobID); id != "" {
			s.mu.Lock()
			n, _ := strconv.Atoi(strings.TrimSpace(r.Header.Get(mockprovider.HeaderAttempt)))
			s.by[sendKey(id, n)] = replica
			s.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return "http://" + ln.Addr().String() + s.prov.Config().Path
}

// from returns the arrivals sent by replica.
func (s *senders) from(arr []mockprovider.Arrival, replica string) []mockprovider.Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []mockprovider.Arrival
	for _, a := range arr {
		if s.by[sendKey(a.JobID, a.Attempt)] == replica {
			out = append(out, a)
		}
	}
	return out
}

// shares counts the arrivals by replica.
func (s *senders) shares(arr []mockprovider.Arrival) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, a := range arr {
		out[s.by[sendKey(a.JobID, a.Attempt)]]++
	}
	return out
}
