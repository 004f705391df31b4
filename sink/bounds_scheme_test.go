package sink

import (
	"crypto/x509"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/queue"
)

// tlsRecorder is an HTTPS test server on 127.0.0.1 that keeps the
// Authorization header of every request it gets, by request URI.
type tlsRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	auth map[string]string
}

func newTLSRecorder(t *testing.T) *tlsRecorder {
	t.Helper()
	r := &tlsRecorder{auth: map[string]string{}}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.auth[req.RequestURI] = req.Header.Get("Authorization")
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

// trusting returns cfg trusting r's certificate.
func (r *tlsRecorder) trusting(cfg HTTPConfig) HTTPConfig {
	cfg.rootCAs = x509.NewCertPool()
	cfg.rootCAs.AddCert(r.Certificate())
	return cfg
}

// received returns the Authorization header of each request, by URI.
func (r *tlsRecorder) received() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.auth)
}

// wantDowngradeRefused checks that Check and Send both refuse j, naming
// request.url and https, and that arrivals (at the host j names) stays 0.
func wantDowngradeRefused(t *testing.T, cfg HTTPConfig, j *queue.Job, arrivals func() int64) {
	t.Helper()
	s := newSink(t, cfg)
	err := s.Bounds().Check(j)
	var fe *queue.FieldError
	if !errors.Is(err, queue.ErrInvalidJob) || !errors.As(err, &fe) || fe.Field != "request.url" ||
		!strings.Contains(fe.Reason, "must be https") || !strings.Contains(err.Error(), "request.url") {
		t.Errorf("Check of an http request.url with an https sink.url: got %v, want a FieldError on request.url saying it must be https", err)
	}
	err = s.Send(t.Context(), j)
	if !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "request.url: must be https") {
		t.Errorf("Send of an http request.url with an https sink.url: got %v, want ErrPermanent naming request.url", err)
	}
	for _, secret := range []string{"s3cret", "tok-123", "k1", "k2"} {
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows a secret (%s): %v", secret, err)
		}
	}
	if n := arrivals(); n != 0 {
		t.Errorf("arrivals at the provider over http: got %d, want 0 (the credentials would travel in clear)", n)
	}
}

// With an https sink.url, a job's request.url naming sink.url's host over
// http is refused by Check and Send, and nothing reaches the host: the
// URL's credentials, the auth header, the base query and sink.headers
// would travel in clear.
func TestBoundsRefusesHTTPForHTTPSSinkHost(t *testing.T) {
	env := map[string]string{"PROVIDER_TOKEN": "tok-123"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name string
		cfg  func(addr string) HTTPConfig
	}{
		{"url credentials and query", func(addr string) HTTPConfig {
			return HTTPConfig{URL: "https://ann:s3cret@" + addr + "/send?api_key=k1"}
		}},
		{"bearer auth", func(addr string) HTTPConfig {
			return HTTPConfig{URL: "https://" + addr + "/send",
				Auth: Auth{Type: AuthBearer, SecretEnv: "PROVIDER_TOKEN", LookupEnv: lookup}}
		}},
		{"api key header", func(addr string) HTTPConfig {
			return HTTPConfig{URL: "https://" + addr + "/send", Headers: Headers{"X-Api-Key": "k2"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := recordingProvider(t) // plain http: what a downgraded request would reach
			addr := p.Addr().String()
			j := smsJob(`{"to":"+1555"}`)
			j.Request = &queue.Request{URL: "http://" + addr + "/send"}
			wantDowngradeRefused(t, tt.cfg(addr), j, func() int64 { n, _ := p.Counts(); return n })
		})
	}
}

// With an https sink.url, a job's request.url naming an allowed host over
// http is refused as well: sink.auth and sink.headers go to allowed hosts.
func TestBoundsRefusesHTTPForHTTPSAllowedHost(t *testing.T) {
	p := recordingProvider(t)
	_, port, _ := strings.Cut(p.Addr().String(), ":")
	cfg := HTTPConfig{URL: "https://api.example.invalid/send?api_key=k1", AllowedHosts: []string{"localhost"},
		Headers: Headers{"X-Api-Key": "k2"}}
	j := smsJob(`{"to":"+1555"}`)
	j.Request = &queue.Request{URL: "http://localhost:" + port + "/send/other"}
	wantDowngradeRefused(t, cfg, j, func() int64 { n, _ := p.Counts(); return n })
}

// An https request.url is accepted with an https sink.url, on its host and
// on an allowed one, and sent there with the sink's credentials kept to
// its own host.
func TestBoundsAcceptsHTTPSForHTTPSSink(t *testing.T) {
	prov, other := newTLSRecorder(t), newTLSRecorder(t) // one test certificate: prov's roots trust both
	otherHost := strings.TrimPrefix(other.URL, "https://")
	cfg := prov.trusting(HTTPConfig{URL: "https://ann:s3cret@" + strings.TrimPrefix(prov.URL, "https://") + "/send?api_key=k1",
		AllowedHosts: []string{otherHost}})
	s := newSink(t, cfg)

	same := smsJob(`{"to":"+1555"}`)
	same.Request = &queue.Request{URL: prov.URL + "/other"}
	allowed := smsJob(`{"to":"+1555"}`)
	allowed.Request = &queue.Request{URL: other.URL + "/elsewhere"}
	for _, j := range []*queue.Job{same, allowed} {
		if err := s.Bounds().Check(j); err != nil {
			t.Errorf("Check of %s with an https sink.url: got %v, want nil", j.Request.URL, err)
		}
		if err := s.Send(t.Context(), j); err != nil {
			t.Errorf("Send to %s: %v", j.Request.URL, err)
		}
	}
	if got := prov.received(); len(got) != 1 || !strings.HasPrefix(got["/other?api_key=k1"], "Basic ") {
		t.Errorf("sink.url's host over https: got %v, want only /other?api_key=k1 with basic auth", got)
	}
	got := other.received()
	if auth, ok := got["/elsewhere"]; len(got) != 1 || !ok || auth != "" {
		t.Errorf("allowed host over https: got %v, want only /elsewhere without sink.url's credentials", got)
	}
}

// An http sink.url may be named with https by a job (an upgrade), on its
// host or an allowed one.
func TestBoundsAcceptsHTTPSForHTTPSink(t *testing.T) {
	b, err := NewBounds(HTTPConfig{URL: "http://ann:s3cret@api.example.com/send?key=k",
		AllowedHosts: []string{"other.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"https://api.example.com/send", "https://other.example.com/x", "http://other.example.com/x"} {
		j := smsJob(`{"to":"+1555"}`)
		j.Request = &queue.Request{URL: u}
		if err := b.Check(j); err != nil {
			t.Errorf("Check of %s with an http sink.url: got %v, want nil", u, err)
		}
	}
}
