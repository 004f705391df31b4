package mockprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

func TestRecordsHeaders(t *testing.T) {
	p := start(t, mockprovider.Config{KeepBodies: true})
	c := newClient(t)
	enq := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	before := time.Now()
	r := post(t, c, p.URL(), `{"to":"+15550100","text":"hi"}`, jobHeaders("job-1", "vip", 3, enq))
	after := time.Now()

	if r.status != http.StatusOK {
		t.Fatalf("status: got %d, want 200 (body %s)", r.status, r.body)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || body["status"] != "accepted" {
		t.Errorf("body: got %s (%v), want JSON with status accepted", r.body, err)
	}
	got := p.Arrivals()
	if len(got) != 1 {
		t.Fatalf("arrivals: got %d, want 1", len(got))
	}
	a := got[0]
	want := mockprovider.Arrival{Seq: 1, At: a.At, JobID: "job-1", Lane: "vip", Attempt: 3, Key: "key-job-1",
		EnqueuedAt: enq, Method: "POST", URI: "/send", BodyBytes: 30, Body: json.RawMessage(`{"to":"+15550100","text":"hi"}`),
		Header: a.Header, Status: 200}
	if got := a.Header.Get(mockprovider.HeaderJobID); got != "job-1" || a.Header.Get("Content-Type") != "application/json" {
		t.Errorf("recorded headers: got %v, want X-Sluice-Job-Id job-1 and Content-Type application/json", a.Header)
	}
	if !a.EnqueuedAt.Equal(enq) {
		t.Errorf("enqueued at: got %v, want %v", a.EnqueuedAt, enq)
	}
	a.EnqueuedAt, want.EnqueuedAt = time.Time{}, time.Time{}
	if fmt.Sprint(a) != fmt.Sprint(want) {
		t.Errorf("arrival:\n got %+v\nwant %+v", a, want)
	}
	if a.At.Before(before) || a.At.After(after) {
		t.Errorf("arrival time %v not within the request [%v, %v]", a.At, before, after)
	}
}

func TestMissingHeadersAndBadBody(t *testing.T) {
	p := start(t, mockprovider.Config{})
	c := newClient(t)
	if r := post(t, c, p.URL(), `{}`, map[string]string{mockprovider.HeaderAttempt: "x",
		mockprovider.HeaderEnqueuedAt: "yesterday"}); r.status != 200 {
		t.Errorf("no headers: got status %d, want 200", r.status)
	}
	if r := post(t, c, p.URL(), `{not json`, nil); r.status != 400 || !strings.Contains(r.body, "not valid JSON") {
		t.Errorf("bad body: got %d %s, want 400 naming JSON", r.status, r.body)
	}
	got := p.Arrivals()
	if len(got) != 2 {
		t.Fatalf("arrivals: got %d, want 2", len(got))
	}
	if got[0].Attempt != 0 || !got[0].EnqueuedAt.IsZero() || got[0].JobID != "" {
		t.Errorf("unreadable headers: got %+v, want zero attempt, enqueued-at and id", got[0])
	}
	if got[1].Status != 400 || got[1].Seq != 2 {
		t.Errorf("bad body arrival: got %+v, want status 400 seq 2", got[1])
	}
}

// statusesOf sends n jobs one after the other and returns the statuses and
// the Retry-After of the 429s.
func statusesOf(t *testing.T, p *mockprovider.Provider, c *http.Client, n int) ([]int, map[string]int) {
	t.Helper()
	var statuses []int
	retryAfter := map[string]int{}
	for i := range n {
		r := post(t, c, p.URL(), `{"n":1}`, jobHeaders(fmt.Sprint("job-", i), "default", 1, time.Now()))
		statuses = append(statuses, r.status)
		if r.status == 429 {
			retryAfter[r.header.Get("Retry-After")]++
		}
		if r.status == 400 && !json.Valid([]byte(r.body)) {
			t.Fatalf("400 body is not JSON: %s", r.body)
		}
	}
	return statuses, retryAfter
}

func TestSharesAreSeededAndRoughlyMatch(t *testing.T) {
	cfg := mockprovider.Config{ThrottleShare: 0.10, ErrorShare: 0.05, RejectShare: 0.05,
		RetryAfter: 1500 * time.Millisecond, Seed: 42}
	p := start(t, cfg)
	c := newClient(t)
	const n = 2000
	first, retryAfter := statusesOf(t, p, c, n)

	count := map[int]int{}
	for _, s := range first {
		count[s]++
	}
	// Binomial standard deviation is at most sqrt(2000*0.1*0.9) ~ 13.4
	// requests; allow 5 of them.
	for status, share := range map[int]float64{429: 0.10, 500: 0.05, 400: 0.05, 200: 0.80} {
		want := share * n
		if got := float64(count[status]); got < want-67 || got > want+67 {
			t.Errorf("status %d: got %v answers, want %v ± 67", status, got, want)
		}
	}
	if len(retryAfter) != 1 || retryAfter["2"] != count[429] {
		t.Errorf("Retry-After of the 429s: got %v, want all \"2\" (1.5s rounded up)", retryAfter)
	}
	if rep := p.Report(time.Time{}, time.Time{}); rep.Count != n || rep.Delivered != count[200] {
		t.Errorf("report: got count %d delivered %d, want %d and %d", rep.Count, rep.Delivered, n, count[200])
	}

	p.Reset()
	again, _ := statusesOf(t, p, c, n)
	if !slices.Equal(first, again) {
		t.Errorf("after Reset, the same seed gave different answers")
	}
	other := start(t, mockprovider.Config{ThrottleShare: 0.10, ErrorShare: 0.05, RejectShare: 0.05, Seed: 43})
	if third, _ := statusesOf(t, other, c, 200); slices.Equal(first[:200], third) {
		t.Errorf("another seed gave the same 200 answers")
	}
}

func TestSequenceThenOK(t *testing.T) {
	p := start(t, mockprovider.Config{ErrorShare: 1})
	p.SetResponder(mockprovider.Sequence(
		mockprovider.Answer{Status: 429, RetryAfter: time.Second},
		mockprovider.Answer{Status: 503, RetryAfter: 2 * time.Second, Body: `{"busy":true}`},
	))
	c := newClient(t)
	want := []struct {
		status     int
		retryAfter string
	}{{429, "1"}, {503, "2"}, {200, ""}, {200, ""}}
	for i, w := range want {
		r := post(t, c, p.URL(), `{}`, jobHeaders("job-a", "vip", i+1, time.Now()))
		if r.status != w.status || r.header.Get("Retry-After") != w.retryAfter {
			t.Errorf("request %d: got %d Retry-After %q, want %d %q", i+1, r.status, r.header.Get("Retry-After"), w.status, w.retryAfter)
		}
	}
	got := p.Arrivals()
	if len(got) != 4 || got[0].RetryAfter != time.Second || got[1].Status != 503 {
		t.Errorf("recorded answers: got %+v", got)
	}
	p.SetResponder(nil) // back to ErrorShare 1
	if r := post(t, c, p.URL(), `{}`, nil); r.status != 500 {
		t.Errorf("after SetResponder(nil): got %d, want 500 from the shares", r.status)
	}
}

func TestResponderSeesArrival(t *testing.T) {
	p := start(t, mockprovider.Config{})
	p.SetResponder(func(a mockprovider.Arrival) mockprovider.Answer {
		if a.Attempt < 2 {
			return mockprovider.Answer{Status: 408}
		}
		return mockprovider.Answer{}
	})
	c := newClient(t)
	for attempt, want := range map[int]int{1: 408, 2: 200} {
		if r := post(t, c, p.URL(), `{}`, jobHeaders("j", "l", attempt, time.Now())); r.status != want {
			t.Errorf("attempt %d: got %d, want %d", attempt, r.status, want)
		}
	}
}

func TestDelayOutlivesClient(t *testing.T) {
	p := start(t, mockprovider.Config{Latency: 10 * time.Millisecond})
	p.SetResponder(mockprovider.Sequence(mockprovider.Answer{Delay: time.Minute}))
	c := newClient(t)
	c.Timeout = 200 * time.Millisecond
	if _, err := c.Post(p.URL(), "application/json", strings.NewReader(`{}`)); err == nil {
		t.Fatal("a minute's delay did not time the client out")
	}
	// The client gave up; the provider still recorded what it would have
	// answered, and Close (in Cleanup) must not wait the minute.
	if got := p.Arrivals(); len(got) != 1 || got[0].Status != 200 {
		t.Errorf("arrivals: got %+v, want one answered 200", got)
	}
	c.Timeout = 10 * time.Second
	start := time.Now()
	if r := post(t, c, p.URL(), `{}`, nil); r.status != 200 || time.Since(start) < 10*time.Millisecond {
		t.Errorf("second request: got %d after %v, want 200 after the 10ms latency", r.status, time.Since(start))
	}
}

func TestMaxArrivalsKeepsNewest(t *testing.T) {
	p := start(t, mockprovider.Config{MaxArrivals: 3})
	c := newClient(t)
	for i := range 5 {
		post(t, c, p.URL(), `{}`, jobHeaders(fmt.Sprint(i), "l", 1, time.Now()))
	}
	var ids []string
	for _, a := range p.Arrivals() {
		ids = append(ids, a.JobID)
	}
	if !slices.Equal(ids, []string{"2", "3", "4"}) {
		t.Errorf("kept: got %v, want [2 3 4]", ids)
	}
	if rep := p.Report(time.Time{}, time.Time{}); rep.Dropped != 2 || rep.Count != 3 {
		t.Errorf("report: got count %d dropped %d, want 3 and 2", rep.Count, rep.Dropped)
	}
}

func TestControlEndpoints(t *testing.T) {
	p := start(t, mockprovider.Config{Cap: 100})
	c := newClient(t)
	base := "http://" + p.Addr().String()
	post(t, c, p.URL(), `{}`, jobHeaders("a", "vip", 1, time.Now()))
	post(t, c, p.URL(), `{}`, jobHeaders("a", "vip", 2, time.Now()))
	post(t, c, p.URL(), `{}`, jobHeaders("b", "default", 1, time.Now()))

	status, body := get(t, c, base+"/report")
	var rep mockprovider.Report
	if err := json.Unmarshal(body, &rep); status != 200 || err != nil {
		t.Fatalf("/report: got %d %v %s", status, err, body)
	}
	if rep.Count != 3 || rep.Duplicates != 1 || rep.DuplicateJobs != 1 || len(rep.Lanes) != 2 || rep.Cap != 100 {
		t.Errorf("/report: got %+v, want 3 arrivals, 1 duplicate, 2 lanes, cap 100", rep)
	}

	status, body = get(t, c, base+"/arrivals")
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if status != 200 || len(lines) != 3 {
		t.Fatalf("/arrivals: got %d with %d lines, want 3 lines", status, len(lines))
	}
	var a mockprovider.Arrival
	if err := json.Unmarshal([]byte(lines[2]), &a); err != nil || a.JobID != "b" || a.Seq != 3 {
		t.Errorf("/arrivals line 3: got %+v (%v), want job b seq 3", a, err)
	}

	future := time.Now().Add(time.Hour).Format(time.RFC3339Nano)
	if status, body = get(t, c, base+"/arrivals?since="+future); status != 200 || len(body) != 0 {
		t.Errorf("/arrivals?since=future: got %d %q, want 200 and nothing", status, body)
	}
	if status, body = get(t, c, base+"/report?until=tomorrow"); status != 400 || !strings.Contains(string(body), "until") {
		t.Errorf("/report?until=tomorrow: got %d %s, want 400 naming until", status, body)
	}
	if r := post(t, c, base+"/reset", "", nil); r.status != http.StatusNoContent {
		t.Errorf("/reset: got %d, want 204", r.status)
	}
	if n := len(p.Arrivals()); n != 0 {
		t.Errorf("after /reset: got %d arrivals, want 0", n)
	}
	if status, _ := get(t, c, p.URL()); status != http.StatusMethodNotAllowed {
		t.Errorf("GET on the job path: got %d, want 405", status)
	}
}

// A form body is recorded byte for byte, with its method, path and query
// below the job path, and is not refused as bad JSON.
func TestRecordsFormBodyPathAndMethod(t *testing.T) {
	p := start(t, mockprovider.Config{KeepBodies: true})
	c := newClient(t)
	req, err := http.NewRequest(http.MethodPut, p.URL()+"/v2/sms?x=1", strings.NewReader("To=%2B1555&Body=hi+there"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("form PUT: got %d, want 200", resp.StatusCode)
	}
	a := p.Arrivals()[0]
	if a.Method != "PUT" || a.URI != "/send/v2/sms?x=1" || string(a.RawBody) != "To=%2B1555&Body=hi+there" || a.Body != nil {
		t.Errorf("arrival: got method %s uri %s raw %q body %s, want PUT /send/v2/sms?x=1 and the form's bytes", a.Method, a.URI, a.RawBody, a.Body)
	}
}

func TestStartCloseErrors(t *testing.T) {
	p, err := mockprovider.New(mockprovider.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); !errors.Is(err, mockprovider.ErrNotServing) {
		t.Errorf("Close before Start: got %v, want ErrNotServing", err)
	}
	if p.URL() != "" {
		t.Errorf("URL before Start: got %q, want empty", p.URL())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); !errors.Is(err, mockprovider.ErrAlreadyServing) {
		t.Errorf("second Start: got %v, want ErrAlreadyServing", err)
	}
	if !strings.HasPrefix(p.URL(), "http://127.0.0.1:") || !strings.HasSuffix(p.URL(), "/send") {
		t.Errorf("URL: got %q", p.URL())
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestServeOnListener(t *testing.T) {
	p, err := mockprovider.New(mockprovider.Config{Path: "/v1/messages"})
	if err != nil {
		t.Fatal(err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	c := newClient(t)
	url := "http://" + ln.Addr().String() + "/v1/messages"
	if r := post(t, c, url, `{}`, nil); r.status != 200 {
		t.Errorf("POST: got %d, want 200", r.status)
	}
	// Serve records its address before it serves, so it is known now.
	if p.URL() != url {
		t.Errorf("URL: got %q, want %q", p.URL(), url)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: got %v, want nil after the context ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10s of its context ending")
	}
}

func TestHandlerMounts(t *testing.T) {
	p, err := mockprovider.New(mockprovider.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	c := newClient(t)
	if r := post(t, c, srv.URL+"/send", `{}`, nil); r.status != 200 || len(p.Arrivals()) != 1 {
		t.Errorf("mounted handler: got %d and %d arrivals, want 200 and 1", r.status, len(p.Arrivals()))
	}
}
