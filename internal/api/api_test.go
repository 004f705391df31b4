package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/api"
	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
	"github.com/sluicehq/sluice/queue/redisq"
	"github.com/sluicehq/sluice/sink"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "test-token-0123456789"

var prio = priority.Config{Lanes: []priority.Lane{{Name: "vip"}, {Name: "default"}}, PrivilegedUsers: []string{"alice"}}

// harness is a server on a real backend, checked against docs/openapi.yaml.
type harness struct {
	t      *testing.T
	q      queue.Queue
	srv    *httptest.Server
	router routers.Router
	doc    *openapi3.T
	seen   map[string]bool // "METHOD /path template" of the calls validated
}

func openQueue(t *testing.T, backend string) queue.Queue {
	t.Helper()
	cfg := queue.Config{Name: "api", Lanes: prio.LaneNames(), MaxCost: 10}
	var q queue.Queue
	var err error
	switch backend {
	case "redis":
		srv := testredis.Start(t, testredis.Options{})
		testredis.RequireReal(t, srv)
		q, err = redisq.New(srv.Client(), cfg)
	case "nats":
		srv := testnats.Start(t)
		js, jerr := jetstreamOf(srv)
		if jerr != nil {
			t.Fatal(jerr)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		q, err = natsq.New(ctx, js, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func jetstreamOf(srv *testnats.Server) (jetstream.JetStream, error) { return jetstream.New(srv.Conn()) }

func newHarness(t *testing.T, backend string) *harness {
	t.Helper()
	q := openQueue(t, backend)
	bounds, err := sink.NewBounds(sink.HTTPConfig{URL: "https://sms.example.com/send", AllowedHosts: []string{"eu.sms.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(q, prio, producer.WithMaxCost(10), producer.WithJobCheck(bounds.Check))
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Options{Queue: "api", Backend: backend, Producer: p, Inspector: q,
		Locator: q.(queue.Locator), Canceler: q.(queue.Canceler), Token: token, MaxBodyBytes: 8 << 10, MaxBatch: 50,
		Rate: func(context.Context) (*api.RateStatus, error) {
			return &api.RateStatus{Configured: 400, Effective: 400, Replicas: 2}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, q: q, srv: httptest.NewServer(s.Handler()), seen: map[string]bool{}}
	t.Cleanup(h.srv.Close)
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatalf("load docs/openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("docs/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: h.srv.URL}}
	h.doc = doc
	if h.router, err = gorillamux.NewRouter(doc); err != nil {
		t.Fatal(err)
	}
	return h
}

// answer is a response, its body decoded.
type answer struct {
	status int
	body   map[string]any
	raw    string
}

// call makes a request and checks it and its answer against the OpenAPI
// document: the request only when it is meant to be valid (checkReq), the
// answer always.
func (h *harness) call(method, path, body string, checkReq bool, edit ...func(*http.Request)) answer {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, e := range edit {
		e(req)
	}
	route, params, err := h.router.FindRoute(req)
	if err != nil {
		if checkReq {
			h.t.Fatalf("%s %s: not in docs/openapi.yaml: %v", method, path, err)
		}
		return h.callOutside(req)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if checkReq {
		if err := openapi3filter.ValidateRequest(h.t.Context(), in); err != nil {
			h.t.Errorf("%s %s: the request breaks docs/openapi.yaml: %v", method, path, err)
		}
		req.Body = io.NopCloser(strings.NewReader(body)) // ValidateRequest read it
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
		Header: resp.Header, Body: io.NopCloser(bytes.NewReader(raw)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(h.t.Context(), out); err != nil {
		h.t.Errorf("%s %s: answer %d %s breaks docs/openapi.yaml: %v", method, path, resp.StatusCode, raw, err)
	}
	h.seen[method+" "+route.Path] = true
	a := answer{status: resp.StatusCode, raw: string(raw)}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		h.t.Errorf("%s %s: answer %d is not a JSON object: %s", method, path, resp.StatusCode, raw)
	}
	return a
}

// callOutside makes a request that the document has no operation for (a
// method not allowed) and checks that the answer is the document's Error.
func (h *harness) callOutside(req *http.Request) answer {
	h.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(raw)}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		h.t.Fatalf("%s %s: answer is not JSON: %s", req.Method, req.URL.Path, raw)
	}
	a.body, _ = v.(map[string]any)
	if err := h.doc.Components.Schemas["Error"].Value.VisitJSON(v); err != nil {
		h.t.Errorf("%s %s: answer %s is not the document's Error: %v", req.Method, req.URL.Path, raw, err)
	}
	return a
}

// wantError checks an error answer: its status and the fields it names.
func wantError(t *testing.T, what string, a answer, status int, fields ...string) {
	t.Helper()
	if a.status != status {
		t.Errorf("%s: got %d %s, want %d", what, a.status, a.raw, status)
		return
	}
	var named []string
	e, _ := a.body["error"].(map[string]any)
	fs, _ := e["fields"].([]any)
	for _, f := range fs {
		m, _ := f.(map[string]any)
		named = append(named, fmt.Sprint(m["field"]))
	}
	for _, f := range fields {
		if !slices.Contains(named, f) {
			t.Errorf("%s: error names %v, want %s among them (%s)", what, named, f, a.raw)
		}
	}
}

// waitTotal waits until the queue's Stats count n jobs stored. Stats may
// lag the enqueues it counts, as the conformance suite allows: a NATS
// consumer's pending count catches up with its stream a moment after the
// publish was acknowledged (TestAPI/nats once read 0 right after three).
func (h *harness) waitTotal(n int64, what string) {
	h.t.Helper()
	poll.Until(h.t, 10*time.Second, 5*time.Millisecond, fmt.Sprintf("%s: %d", what, n), func() bool { return h.total() == n })
}

func (h *harness) total() int64 {
	h.t.Helper()
	st, err := h.q.Stats(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	n := st.DeadLetters
	for _, l := range st.Lanes {
		n += l.Ready + l.Delayed + l.InFlight
	}
	return n
}

func TestAPI(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) { testAPI(t, backend) })
	}
}

func testAPI(t *testing.T, backend string) {
	h := newHarness(t, backend)
	jobs := "/v1/queues/api/jobs"

	one := h.call("POST", jobs, `{"user":"alice","key":"otp-1","payload":{"to":"+15550100"}}`, true)
	id, _ := one.body["id"].(string)
	if one.status != 201 || id == "" || one.body["duplicate"] != false {
		t.Fatalf("enqueue one: got %d %s, want 201 with an id, not a duplicate", one.status, one.raw)
	}
	dup := h.call("POST", jobs, `{"key":"otp-1","payload":{"to":"+15550100"}}`, true)
	if dup.status != 200 || dup.body["duplicate"] != true || (backend == "redis" && dup.body["id"] != id) {
		t.Errorf("enqueue the same key: got %d %s, want 200, duplicate, the first id %s", dup.status, dup.raw, id)
	}
	batch := h.call("POST", jobs, `{"jobs":[{"payload":{"n":1}},{"key":"otp-1","payload":{"n":2}},
		{"payload":{"n":3},"request":{"url":"https://eu.sms.example.com/send","path":"/v2","headers":{"X-Tenant":"acme"}}}]}`, true)
	got, _ := json.Marshal(batch.body["jobs"])
	if batch.status != 201 || !strings.Contains(string(got), `"duplicate":true`) || strings.Count(string(got), `"duplicate":false`) != 2 {
		t.Errorf("enqueue a batch: got %d %s, want 201 with the second job a duplicate", batch.status, batch.raw)
	}
	h.waitTotal(3, "jobs stored")

	bad := h.call("POST", jobs, `{"jobs":[{"payload":{"n":1}},{"cost":11,"payload":{"n":2}},
		{"payload":null},{"id":"x","request":{"url":"https://evil.example/x"},"payload":1},{"payload":1,"colour":"red"}]}`, false)
	wantError(t, "a batch with bad jobs", bad, 400, "jobs[1].cost", "jobs[2].payload", "jobs[3].request.url", "jobs[4].colour")
	wantError(t, "malformed JSON", h.call("POST", jobs, `{"payload": {"to": }`, false), 400, "body")
	wantError(t, "a batch of none", h.call("POST", jobs, `{"jobs":[]}`, false), 400, "jobs")
	wantError(t, "too big", h.call("POST", jobs, `{"payload":"`+strings.Repeat("x", 9000)+`"}`, false), 413, "body")
	wantError(t, "wrong token", h.call("POST", jobs, `{"payload":1}`, false, func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer wrong-token-0123456789")
	}), 401, "Authorization")
	wantError(t, "no token", h.call("GET", "/v1/queues/api", "", false, func(r *http.Request) { r.Header.Del("Authorization") }), 401, "Authorization")
	wantError(t, "form body", h.call("POST", jobs, `payload=1`, false, func(r *http.Request) {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}), 415, "Content-Type")
	wantError(t, "another queue", h.call("POST", "/v1/queues/other/jobs", `{"payload":1}`, false), 404, "queue")
	wantError(t, "PUT on jobs", h.call("PUT", jobs, `{"payload":1}`, false), 405, "method")
	// None of the refused requests stored a job: one enqueued after them
	// brings the count to 4, not 5. (Redis counts at once; NATS counts a
	// lane's jobs in the order they were stored, so a job the requests had
	// stored would be counted before the one after them.)
	if a := h.call("POST", jobs, `{"payload":{"n":4}}`, true); a.status != 201 {
		t.Fatalf("enqueue after the refused requests: got %d %s, want 201", a.status, a.raw)
	}
	h.waitTotal(4, "jobs stored after the refused requests and one more")

	loc := h.call("GET", jobs+"/"+id, "", true)
	if loc.status != 200 || loc.body["state"] != "waiting" || loc.body["lane"] != "vip" {
		t.Errorf("locate a waiting job: got %d %s, want 200 waiting in vip", loc.status, loc.raw)
	}
	if a := h.call("GET", jobs+"/no-such-job", "", true); a.status != 404 || a.body["state"] != "unknown" {
		t.Errorf("locate an unknown job: got %d %s, want 404 unknown", a.status, a.raw)
	}
	ds, err := h.q.Fetch(t.Context(), "default", 1) // held by a "dispatcher"
	if err != nil {
		t.Fatal(err)
	}
	held := ds[0].Job().ID
	if a := h.call("GET", jobs+"/"+held, "", true); a.body["state"] != "in_flight" {
		t.Errorf("locate a held job: got %s, want in_flight", a.raw)
	}
	wantError(t, "cancel a held job", h.call("DELETE", jobs+"/"+held, "", true), 409, "id")
	if err := ds[0].DeadLetter(t.Context(), "status 400: invalid number"); err != nil {
		t.Fatal(err)
	}
	if a := h.call("GET", jobs+"/"+held, "", true); a.body["state"] != "dead" || a.body["reason"] != "status 400: invalid number" {
		t.Errorf("locate a dead job: got %s, want dead with the reason", a.raw)
	}
	for _, cid := range []string{id, held} {
		if a := h.call("DELETE", jobs+"/"+cid, "", true); a.status != 200 || a.body["state"] != "cancelled" {
			t.Errorf("cancel %s: got %d %s, want 200 cancelled", cid, a.status, a.raw)
		}
	}
	wantError(t, "cancel twice", h.call("DELETE", jobs+"/"+id, "", true), 404, "id")

	st := h.call("GET", "/v1/queues/api", "", true)
	if st.status != 200 || st.body["dead_letters"] != float64(0) || len(st.body["lanes"].([]any)) != 2 {
		t.Errorf("status: got %d %s, want 200, 2 lanes, no dead letters", st.status, st.raw)
	}

	for path, item := range h.doc.Paths.Map() {
		for method := range item.Operations() {
			if !h.seen[method+" "+path] {
				t.Errorf("%s %s of docs/openapi.yaml was never called", method, path)
			}
		}
	}
}
