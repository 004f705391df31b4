package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
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

// senders tells which replica sent each request: every replica's sink URL
// carries its name in a query parameter (?sender=r0), which the provider
// records with the arrival's URI. All of them reach the provider's own
// listener, so every arrival is stamped with the kernel's receive time
// (a listener of the test's own would stamp them as its handler ran, and
// a provider descheduled for a few milliseconds would record requests that
// left evenly as a burst).
type senders struct {
	prov *mockprovider.Provider
}

func newSenders(prov *mockprovider.Provider) *senders { return &senders{prov: prov} }

// senderParam is the query parameter that names the replica.
const senderParam = "sender"

// sinkURL returns the sink URL replica is to use.
func (s *senders) sinkURL(_ *testing.T, replica string) string {
	return s.prov.URL() + "?" + url.Values{senderParam: {replica}}.Encode()
}

// senderOf returns the replica that sent a, named in its URI by
// senders.sinkURL; empty when none is.
func senderOf(a mockprovider.Arrival) string {
	u, err := url.ParseRequestURI(a.URI)
	if err != nil {
		return ""
	}
	return u.Query().Get(senderParam)
}

// from returns the arrivals sent by replica.
func (s *senders) from(arr []mockprovider.Arrival, replica string) []mockprovider.Arrival {
	var out []mockprovider.Arrival
	for _, a := range arr {
		if senderOf(a) == replica {
			out = append(out, a)
		}
	}
	return out
}

// shares counts the arrivals by replica.
func (s *senders) shares(arr []mockprovider.Arrival) map[string]int {
	out := map[string]int{}
	for _, a := range arr {
		out[senderOf(a)]++
	}
	return out
}
