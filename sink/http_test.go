package sink

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/queue"
)

func TestSendRequest(t *testing.T) {
	type seen struct {
		method, path, body string
		header             http.Header
		user, pass         string
		basic              bool
	}
	got := make(chan seen, 2)
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		user, pass, ok := r.BasicAuth()
		got <- seen{r.Method, r.URL.RequestURI(), string(b), r.Header.Clone(), user, pass, ok}
		w.WriteHeader(http.StatusAccepted)
	})
	url := strings.Replace(p.URL, "http://", "http://ann:s3cret@", 1) + "/send?v=2"
	h := newSink(t, HTTPConfig{URL: url, Headers: map[string]string{"x-api-key": "k-123"}})

	enq := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))
	j := &queue.Job{ID: "job-1", Key: "idem-1", Lane: "vip", Attempt: 3, EnqueuedAt: enq,
		Payload: json.RawMessage(`{"to":"+15550100","text":"hi"}`)}
	if err := h.Send(context.Background(), j); err != nil {
		t.Fatalf("Send: got %v, want nil", err)
	}
	r := <-got
	checks := []struct{ name, got, want string }{
		{"method", r.method, "POST"},
		{"path", r.path, "/send?v=2"},
		{"body", r.body, `{"to":"+15550100","text":"hi"}`},
		{"Content-Type", r.header.Get("Content-Type"), "application/json"},
		{"Idempotency-Key", r.header.Get("Idempotency-Key"), "idem-1"},
		{"X-Sluice-Job-Id", r.header.Get("X-Sluice-Job-Id"), "job-1"},
		{"X-Sluice-Lane", r.header.Get("X-Sluice-Lane"), "vip"},
		{"X-Sluice-Attempt", r.header.Get("X-Sluice-Attempt"), "3"},
		{"X-Sluice-Enqueued-At", r.header.Get("X-Sluice-Enqueued-At"), "2026-11-21T09:00:00.123456789Z"},
		{"X-Api-Key", r.header.Get("X-Api-Key"), "k-123"},
		{"basic auth user", r.user, "ann"},
		{"basic auth password", r.pass, "s3cret"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	at, err := time.Parse(time.RFC3339Nano, r.header.Get("X-Sluice-Enqueued-At"))
	if err != nil || !at.Equal(enq) {
		t.Errorf("X-Sluice-Enqueued-At parsed: got %v (%v), want %v", at, err, enq)
	}

	// No key: the id is the idempotency key; no EnqueuedAt: no header.
	j = &queue.Job{ID: "job-2", Lane: "default", Attempt: 1, Payload: json.RawMessage(`{}`)}
	if err := h.Send(context.Background(), j); err != nil {
		t.Fatalf("Send: got %v, want nil", err)
	}
	r = <-got
	if k := r.header.Get("Idempotency-Key"); k != "job-2" {
		t.Errorf("Idempotency-Key without a key: got %q, want %q", k, "job-2")
	}
	if v, ok := r.header["X-Sluice-Enqueued-At"]; ok {
		t.Errorf("X-Sluice-Enqueued-At without EnqueuedAt: got %q, want no header", v)
	}
}

func TestSendAuthorizationHeaderWinsOverURLCredentials(t *testing.T) {
	got := make(chan string, 1)
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
	})
	url := strings.Replace(p.URL, "http://", "http://ann:s3cret@", 1)
	h := newSink(t, HTTPConfig{URL: url, Headers: map[string]string{"Authorization": "Bearer tok"}})
	if err := h.Send(context.Background(), &queue.Job{ID: "a", Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if a := <-got; a != "Bearer tok" {
		t.Errorf("Authorization: got %q, want %q", a, "Bearer tok")
	}
}

// class names the one sentinel err matches: "delivered", "throttled",
// "transient", "permanent", or "several"/"none" when it is wrong.
func class(err error) string {
	if err == nil {
		return "delivered"
	}
	var names []string
	for _, c := range []struct {
		name string
		err  error
	}{{"throttled", ErrThrottled}, {"transient", ErrTransient}, {"permanent", ErrPermanent}} {
		if errors.Is(err, c.err) {
			names = append(names, c.name)
		}
	}
	switch len(names) {
	case 0:
		return "none"
	case 1:
		return names[0]
	}
	return "several: " + strings.Join(names, ",")
}

func TestSendClassifiesAnswers(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		status     int
		retryAfter string // header value; "" means none
		date       string // the answer's Date header; "" means the server's own, "none" none
		body       string
		want       string
		wantRetry  time.Duration
		wantInText []string
	}{
		{status: 200, want: "delivered"},
		{status: 201, want: "delivered"},
		{status: 204, want: "delivered"},
		{status: 429, want: "throttled", wantInText: []string{"429"}},
		{status: 429, retryAfter: "7", want: "throttled", wantRetry: 7 * time.Second},
		// A date counts from the answer's Date (the provider's clock, here
		// 10s ahead of the replica's), or from the replica's clock without one.
		{status: 503, retryAfter: "Sat, 21 Nov 2026 10:00:30 GMT", date: "Sat, 21 Nov 2026 10:00:10 GMT", want: "throttled", wantRetry: 20 * time.Second},
		{status: 503, retryAfter: "Sat, 21 Nov 2026 10:00:30 GMT", date: "none", want: "throttled", wantRetry: 30 * time.Second},
		{status: 503, retryAfter: "-3", want: "throttled", wantRetry: 0},
		{status: 429, retryAfter: "soon", want: "throttled", wantRetry: 0},
		{status: 408, want: "transient", wantInText: []string{"408"}},
		{status: 500, body: `{"error":"boom"}`, want: "transient", wantInText: []string{"500", `{"error":"boom"}`}},
		{status: 500, retryAfter: "9", want: "transient"}, // Retry-After ignored
		{status: 502, want: "transient"},
		{status: 504, want: "transient"},
		{status: 400, body: `{"error":"invalid number"}`, want: "permanent",
			wantInText: []string{"status 400 Bad Request", `{"error":"invalid number"}`}},
		{status: 401, want: "permanent"},
		{status: 404, want: "permanent"},
		{status: 422, retryAfter: "9", want: "permanent"},
		{status: 409, want: "permanent"},
	}
	p := newProvider(t, nil)
	h := newSink(t, HTTPConfig{URL: p.URL, Now: func() time.Time { return now }})
	for _, tt := range tests {
		name := http.StatusText(tt.status) + "/" + tt.retryAfter + "/" + tt.date
		t.Run(name, func(t *testing.T) {
			var hdr []string
			if tt.retryAfter != "" {
				hdr = []string{"Retry-After", tt.retryAfter}
			}
			switch tt.date {
			case "":
			case "none":
				hdr = append(hdr, "Date", "")
			default:
				hdr = append(hdr, "Date", tt.date)
			}
			p.setHandler(answer(tt.status, tt.body, hdr...))
			err := h.Send(context.Background(), &queue.Job{ID: "j", Payload: json.RawMessage(`{"secret":"PAYLOAD"}`)})
			if got := class(err); got != tt.want {
				t.Fatalf("got %s (%v), want %s", got, err, tt.want)
			}
			if err == nil {
				return
			}
			var te *ThrottledError
			if errors.As(err, &te) {
				if te.RetryAfter != tt.wantRetry || te.Status != tt.status {
					t.Errorf("got RetryAfter %s Status %d, want %s %d", te.RetryAfter, te.Status, tt.wantRetry, tt.status)
				}
			} else {
				var se *StatusError
				if !errors.As(err, &se) || se.Status != tt.status {
					t.Errorf("got %#v, want a *StatusError with status %d", err, tt.status)
				}
			}
			for _, s := range tt.wantInText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("got %q, want it to contain %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "PAYLOAD") {
				t.Errorf("got %q, which shows the payload", err)
			}
		})
	}
}

func TestSendPermanentErrorCarriesAnswerExcerpt(t *testing.T) {
	long := "\x00bad\r\nrequest:\xff " + strings.Repeat("é", 600) // invalid UTF-8 and control characters
	p := newProvider(t, answer(http.StatusBadRequest, long))
	h := newSink(t, HTTPConfig{URL: p.URL})
	err := h.Send(context.Background(), &queue.Job{ID: "j", Payload: json.RawMessage(`{}`)})
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a *StatusError", err)
	}
	if len(se.Body) > MaxBodyExcerpt {
		t.Errorf("body excerpt: got %d bytes, want at most %d", len(se.Body), MaxBodyExcerpt)
	}
	if !strings.HasPrefix(se.Body, "bad  request: éé") {
		t.Errorf("body excerpt: got %.20q, want it to start %q", se.Body, "bad  request: éé")
	}
	if !se.Truncated {
		t.Error("Truncated: got false, want true")
	}
	if strings.ContainsAny(err.Error(), "\r\n\x00") || !utf8.ValidString(err.Error()) {
		t.Errorf("got %q, want no control characters or invalid UTF-8", err)
	}
	if !strings.HasPrefix(err.Error(), "sink: permanent failure: status 400 Bad Request: bad  request:") || !strings.HasSuffix(err.Error(), "…") {
		t.Errorf("got %q", err)
	}
}

func TestSendRedirectNotFollowed(t *testing.T) {
	hits := make(chan struct{}, 1)
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			hits <- struct{}{}
			return
		}
		http.Redirect(w, r, "/moved?token=abc", http.StatusTemporaryRedirect)
	})
	h := newSink(t, HTTPConfig{URL: p.URL + "/send"})
	err := h.Send(context.Background(), &queue.Job{ID: "j", Payload: json.RawMessage(`{}`)})
	if got := class(err); got != "permanent" {
		t.Fatalf("got %s (%v), want permanent", got, err)
	}
	if want := "status 307 Temporary Redirect (redirect to " + p.URL + "/moved not followed)"; !strings.Contains(err.Error(), want) {
		t.Errorf("got %q, want it to contain %q", err, want)
	}
	if strings.Contains(err.Error(), "token") {
		t.Errorf("got %q, which shows the Location's query", err)
	}
	select {
	case <-hits:
		t.Error("the redirect was followed")
	default:
	}
}

func TestSendTimeoutIsTransient(t *testing.T) {
	p := newProvider(t, nil)
	p.setHandler(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers
		case <-r.Context().Done():
		case <-p.done:
		}
	})
	h := newSink(t, HTTPConfig{URL: p.URL, Timeout: 100 * time.Millisecond})
	err := h.Send(context.Background(), &queue.Job{ID: "j", Payload: json.RawMessage(`{}`)})
	if got := class(err); got != "transient" {
		t.Fatalf("got %s (%v), want transient", got, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(err, context.DeadlineExceeded): got false, want true (%v)", err)
	}
	if !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Errorf("got %q, want it to say no answer within 100ms", err)
	}
}

func TestSendCallerCancelIsTransient(t *testing.T) {
	p := newProvider(t, nil)
	arrived := make(chan struct{})
	p.setHandler(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
		case <-p.done:
		}
	})
	h := newSink(t, HTTPConfig{URL: p.URL})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- h.Send(ctx, &queue.Job{ID: "j", Payload: json.RawMessage(`{}`)}) }()
	<-arrived
	cancel()
	err := <-errc
	if got := class(err); got != "transient" {
		t.Fatalf("got %s (%v), want transient", got, err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(err, context.Canceled): got false, want true (%v)", err)
	}
}

func TestSendConnectionRefusedIsTransient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there any more
	h := newSink(t, HTTPConfig{URL: "http://ann:s3cret@" + addr + "/send?token=tok"})
	err = h.Send(context.Background(), &queue.Job{ID: "j", Payload: json.RawMessage(`{}`)})
	if got := class(err); got != "transient" {
		t.Fatalf("got %s (%v), want transient", got, err)
	}
	want := "sink: transient failure: POST http://" + addr + "/send: "
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %q, want it to start %q", err, want)
	}
	for _, secret := range []string{"ann", "s3cret", "tok"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("got %q, which shows %q from the URL", err, secret)
		}
	}
}

// TestSendReusesConnections sends jobs one after another, whatever the
// answer, and checks that they all go over one connection; after Close
// the idle connection is gone and the next send opens another.
func TestSendReusesConnections(t *testing.T) {
	answers := []http.HandlerFunc{
		answer(200, `{"id":"1"}`),
		answer(400, strings.Repeat("x", 10<<10)),
		answer(500, "oops"),
		answer(429, "", "Retry-After", "1"),
		answer(204, ""),
		answer(302, "", "Location", "/x"),
	}
	p := newProvider(t, nil)
	h := newSink(t, HTTPConfig{URL: p.URL})
	for i := range 30 {
		p.setHandler(answers[i%len(answers)])
		_ = h.Send(context.Background(), &queue.Job{ID: "j", Payload: json.RawMessage(`{}`)})
	}
	if got := p.newConns.Load(); got != 1 {
		t.Errorf("connections for 30 sequential sends: got %d, want 1", got)
	}
	_ = h.Close()
	p.setHandler(answer(200, ""))
	if err := h.Send(context.Background(), &queue.Job{ID: "j", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("Send after Close: %v", err)
	}
	if got := p.newConns.Load(); got != 2 {
		t.Errorf("connections after Close and one more send: got %d, want 2", got)
	}
}

// TestSendConcurrentUpToMaxInFlight holds every request until MaxInFlight
// of them are at the provider at once: that only succeeds if the sink
// really sends them concurrently. A second round goes over the same
// connections: the pool keeps MaxInFlight idle ones.
func TestSendConcurrentUpToMaxInFlight(t *testing.T) {
	const n = 16
	p := newProvider(t, nil)
	b := newBarrier(n)
	p.setHandler(func(w http.ResponseWriter, r *http.Request) {
		if b.wait(r.Context(), p.done) {
			w.WriteHeader(http.StatusOK)
		}
	})
	h := newSink(t, HTTPConfig{URL: p.URL, MaxInFlight: n, Timeout: 30 * time.Second})
	for round := range 2 {
		for i, err := range sendMany(h, n) {
			if err != nil {
				t.Errorf("round %d, send %d: got %v, want nil", round, i, err)
			}
		}
	}
	if got := p.maxSeen.Load(); got != n {
		t.Errorf("requests in flight at once: got %d, want %d", got, n)
	}
	if got := p.newConns.Load(); got != n {
		t.Errorf("connections for two rounds of %d: got %d, want %d", n, got, n)
	}
}

// barrier lets its callers through n at a time.
type barrier struct {
	n     int
	mu    sync.Mutex
	count int
	open  chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, open: make(chan struct{})} }

// wait blocks until n callers are waiting, and reports whether they were
// let through (false when ctx or done ended first).
func (b *barrier) wait(ctx context.Context, done <-chan struct{}) bool {
	b.mu.Lock()
	ch := b.open
	if b.count++; b.count == b.n {
		close(ch)
		b.count, b.open = 0, make(chan struct{})
	}
	b.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	case <-done:
	}
	return false
}

// TestSendBoundedByMaxInFlight sends more jobs at once than MaxInFlight:
// the provider never sees more than MaxInFlight requests or connections,
// and every job is delivered once the first ones are answered.
func TestSendBoundedByMaxInFlight(t *testing.T) {
	const limit, n = 3, 10
	release := make(chan struct{})
	p := newProvider(t, nil)
	p.setHandler(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		case <-p.done:
			return
		}
	})
	h := newSink(t, HTTPConfig{URL: p.URL, MaxInFlight: limit, Timeout: 30 * time.Second})
	done := make(chan []error, 1)
	go func() { done <- sendMany(h, n) }()
	eventually(t, 10*time.Second, func() bool { return p.inFlight.Load() >= limit }, "requests in flight reach the limit")
	holdsFor(t, 200*time.Millisecond, func() bool { return p.inFlight.Load() <= limit }, "requests in flight stay within the limit")
	close(release)
	for i, err := range <-done {
		if err != nil {
			t.Errorf("send %d: got %v, want nil", i, err)
		}
	}
	if got := p.maxSeen.Load(); got != limit {
		t.Errorf("most requests in flight at once: got %d, want %d", got, limit)
	}
	if got := p.newConns.Load(); got > limit {
		t.Errorf("connections opened: got %d, want at most %d", got, limit)
	}
}

func sendMany(h *HTTP, n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = h.Send(context.Background(), &queue.Job{ID: "j", Payload: json.RawMessage(`{}`)})
		})
	}
	wg.Wait()
	return errs
}

func TestSendNilJob(t *testing.T) {
	h := newSink(t, HTTPConfig{URL: "http://127.0.0.1:1/"})
	if got := class(h.Send(context.Background(), nil)); got != "permanent" {
		t.Errorf("got %s, want permanent", got)
	}
}

func TestHTTPString(t *testing.T) {
	h := newSink(t, HTTPConfig{URL: "https://ann:s3cret@api.example.com/v1/send?key=tok"})
	if got, want := h.String(), "http POST https://api.example.com/v1/send"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A gate that refuses stops the request before anything reaches the
// provider; a gate that lets it go runs once, and the request is sent.
func TestSendGate(t *testing.T) {
	var requests atomic.Int64
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		answer(http.StatusOK, "")(w, r)
	})
	h := newSink(t, HTTPConfig{URL: p.URL})
	j := &queue.Job{ID: "g1", Payload: json.RawMessage(`{"to":"+15550100"}`)}

	var checks atomic.Int64
	refuse := WithGate(context.Background(), func() error { checks.Add(1); return ErrLate })
	err := h.Send(refuse, j)
	if !errors.Is(err, ErrLate) {
		t.Errorf("Send with a refusing gate: got %v, want it to match ErrLate", err)
	}
	if c := class(err); c != "none" {
		t.Errorf("Send with a refusing gate matches %s, want none of the provider's classes", c)
	}
	if n := checks.Load(); n != 1 {
		t.Errorf("gate ran %d times, want 1", n)
	}
	if n, c := requests.Load(), p.newConns.Load(); n != 0 || c != 0 {
		t.Errorf("after a refused send the provider saw %d requests on %d connections, want none", n, c)
	}

	checks.Store(0)
	pass := WithGate(context.Background(), func() error { checks.Add(1); return nil })
	if err := h.Send(pass, j); err != nil {
		t.Fatalf("Send with a passing gate: %v", err)
	}
	if n, c := requests.Load(), checks.Load(); n != 1 || c != 2 {
		t.Errorf("with a passing gate: %d requests, gate ran %d times; want 1 and 2 (at the hand-over and at the write)", n, c)
	}
}
