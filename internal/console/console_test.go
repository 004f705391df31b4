package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
	"github.com/sluicehq/sluice/queue/queuetest"
	"github.com/sluicehq/sluice/queue/redisq"
)

// fixture is a console on a real Redis, with a Redis queue.
type fixture struct {
	srv     *httptest.Server
	handler http.Handler // the console's, as srv serves it
	opts    Options      // the console's

	q        queue.Queue
	controls *pacer.Controls
	log      *bytes.Buffer
}

func newFixture(t *testing.T, token string) *fixture {
	t.Helper()
	return newFixtureOn(t, token, "redis")
}

// newFixtureOn is newFixture with the queue on backend (redis or nats); the
// pacer is in Redis either way.
func newFixtureOn(t *testing.T, token, backend string) *fixture {
	t.Helper()
	rs := testredis.Start(t, testredis.Options{})
	rdb := rs.Client()
	cfg := queue.Config{Name: "con", Lanes: []string{"vip", "default"}, Consumer: "test"}
	var q queue.Queue
	var err error
	switch backend {
	case "redis":
		q, err = redisq.New(rdb, cfg)
	case "nats":
		var js jetstream.JetStream
		if js, err = jetstream.New(testnats.Start(t).Conn()); err == nil {
			q, err = natsq.New(t.Context(), js, cfg)
		}
	default:
		t.Fatalf("no backend %q", backend)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	controls, err := pacer.NewControls(rdb, "con")
	if err != nil {
		t.Fatal(err)
	}
	members, err := pacer.NewMembers(rdb, "con")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	opts := Options{Queue: "con", Backend: backend, Q: q, Controls: controls, Members: members, Token: token,
		Log: slog.New(slog.NewTextHandler(&log, nil))}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, handler: h, opts: opts, q: q, controls: controls, log: &log}
}

// do sends a request and returns the status and body.
func (f *fixture) do(t *testing.T, method, path, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (f *fixture) paused(t *testing.T) bool {
	t.Helper()
	st, err := f.controls.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Paused
}

// Actions need the token, JSON, and the same origin; each attempt is
// audited, refused ones too (cross-origin and non-JSON included), and a
// refusal's body is the JSON error the page reads; the schedule pauses only
// when all hold.
func TestActionsGuarded(t *testing.T) {
	f := newFixture(t, "tok")
	jsonTok := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer tok"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range jsonTok {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	for _, tt := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"no token", map[string]string{"Content-Type": "application/json"}, http.StatusUnauthorized},
		{"wrong token", with(map[string]string{"Authorization": "Bearer nope"}), http.StatusUnauthorized},
		{"not bearer", with(map[string]string{"Authorization": "tok"}), http.StatusUnauthorized},
		{"cross-site fetch", with(map[string]string{"Sec-Fetch-Site": "cross-site"}), http.StatusForbidden},
		{"other origin", with(map[string]string{"Origin": "http://evil.example"}), http.StatusForbidden},
		{"form post", with(map[string]string{"Content-Type": "application/x-www-form-urlencoded"}), http.StatusUnsupportedMediaType},
	} {
		if got, body := f.do(t, "POST", "/console/api/pause", "{}", tt.header); got != tt.want || !strings.HasPrefix(body, `{"error":`) {
			t.Errorf("%s: status %d (%s), want %d with a JSON error", tt.name, got, body, tt.want)
		}
		if f.paused(t) {
			t.Fatalf("%s: the schedule was paused", tt.name)
		}
	}
	if got, body := f.do(t, "POST", "/console/api/pause", "{}", with(map[string]string{"Sec-Fetch-Site": "same-origin"})); got != http.StatusOK {
		t.Fatalf("pause with the token: %d %s", got, body)
	}
	if !f.paused(t) {
		t.Error("not paused after an accepted pause")
	}
	if got, body := f.do(t, "POST", "/console/api/rate", `{"rate": -1}`, jsonTok); got != http.StatusBadRequest {
		t.Errorf("rate -1: %d %s, want 400", got, body)
	}
	if got, body := f.do(t, "POST", "/console/api/rate", `{"rate": 12.5}`, jsonTok); got != http.StatusOK {
		t.Errorf("rate 12.5: %d %s", got, body)
	}
	if got, body := f.do(t, "POST", "/console/api/dlq/purge", `{}`, jsonTok); got != http.StatusOK {
		t.Errorf("purge of no dead letters: %d %s, want 200", got, body)
	}
	log := f.log.String()
	if n := strings.Count(log, `result="refused: `); n != 6 {
		t.Errorf("%d refusals in the audit log, want 6 (one per refused attempt):\n%s", n, log)
	}
	for _, want := range []string{
		`msg="sluice: audit" via=console action=pause detail="" result="refused: wrong or missing token"`,
		`action=pause detail="" result=done`,
		`action="set rate" detail=12.5/s result=done`,
		`action=purge detail="deleted 0" result=done`,
		`action=pause detail="" result="refused: cross-origin request"`,
		`action=pause detail="" result="refused: body not application/json"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %s:\n%s", want, log)
		}
	}
}

// Without admin.token_file the console is read-only.
func TestNoTokenReadOnly(t *testing.T) {
	f := newFixture(t, "")
	got, body := f.do(t, "POST", "/console/api/pause", "{}", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer "})
	if got != http.StatusForbidden || !strings.Contains(body, "admin.token_file") {
		t.Errorf("pause without a configured token: %d %s; want 403 naming admin.token_file", got, body)
	}
	got, body = f.do(t, "GET", "/console/api/state", "", nil)
	if got != http.StatusOK || !strings.Contains(body, `"actions":false`) {
		t.Errorf("state: %d %s; want 200 with actions false", got, body)
	}
	got, body = f.do(t, "GET", "/console/", "", nil)
	if got != http.StatusOK || !strings.Contains(body, "<title>sluice console</title>") {
		t.Errorf("page: %d %.200s", got, body)
	}
}

// A Host that names anything but an IP address, localhost or an allowed
// name is refused (DNS rebinding), on a loopback listener and on any other
// address: in Compose the replica listens on its container's address and
// the operator's browser reaches it through 127.0.0.1.
func TestHostGuard(t *testing.T) {
	f := newFixture(t, "tok")
	allowing := f.opts
	allowing.AllowedHosts = []string{"sluice.internal"}
	c, err := New(allowing)
	if err != nil {
		t.Fatal(err)
	}
	refused, ok := http.StatusMisdirectedRequest, http.StatusOK
	for _, tt := range []struct {
		host          string
		want, allowed int // without and with AllowedHosts sluice.internal
	}{
		{"attacker.example", refused, refused},
		{"attacker.example:9464", refused, refused},
		{"localhost.attacker.example", refused, refused},
		{"dispatcher-1:9464", refused, refused},
		{"", refused, refused},
		{"sluice.internal:9464", refused, ok},
		{"SLUICE.internal.", refused, ok},
		{"localhost:1234", ok, ok},
		{"LocalHost", ok, ok},
		{"console.localhost:9464", ok, ok},
		{"127.0.0.1", ok, ok},
		{"127.0.0.1:9464", ok, ok},
		{"[::1]:9464", ok, ok},
		{"[::1]", ok, ok},
		{"192.0.2.2:9464", ok, ok},
	} {
		for _, local := range []net.Addr{
			&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9464},
			&net.TCPAddr{IP: net.IPv4(192, 0, 2, 2), Port: 9464}, // a container's address
		} {
			for _, hw := range []struct {
				h    http.Handler
				want int
			}{{f.handler, tt.want}, {c.Handler(), tt.allowed}} {
				req := httptest.NewRequest("GET", "/console/api/dlq", nil)
				req.Host = tt.host
				req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, local))
				rec := httptest.NewRecorder()
				hw.h.ServeHTTP(rec, req)
				if rec.Code != hw.want {
					t.Errorf("dlq with Host %q on a listener at %s: %d, want %d", tt.host, local, rec.Code, hw.want)
				}
			}
		}
	}
	// Through a real listener too.
	req, _ := http.NewRequest("GET", f.srv.URL+"/console/api/state", nil)
	req.Host = "attacker.example"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != refused {
		t.Errorf("state with Host attacker.example: %d, want %d", res.StatusCode, refused)
	}
	for _, bad := range []string{"", "sluice.internal:9464", "http://sluice.internal"} {
		o := f.opts
		o.AllowedHosts = []string{bad}
		if _, err := New(o); err == nil {
			t.Errorf("New with AllowedHosts %q: no error", bad)
		}
	}
}

// Dead letters: listed without payloads; a payload only with the token;
// requeue leaves expired jobs where they are.
func TestDeadLetters(t *testing.T) {
	f := newFixture(t, "tok")
	ctx := context.Background()
	now := time.Now()
	jobs := []*queue.Job{
		{ID: "fresh", Lane: "default", Payload: json.RawMessage(`{"to":"+1555"}`)},
		{ID: "stale", Lane: "default", ExpiresAt: now.Add(time.Hour), Payload: json.RawMessage(`{"otp":"123"}`)},
	}
	if _, err := f.q.Enqueue(ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	ds, err := f.q.Fetch(ctx, "default", 2)
	if err != nil || len(ds) != 2 {
		t.Fatalf("fetch: %d, %v", len(ds), err)
	}
	for _, d := range ds {
		if err := d.DeadLetter(ctx, "provider answered 400: "+strings.Repeat("x", 300)); err != nil {
			t.Fatal(err)
		}
	}
	got, body := f.do(t, "GET", "/console/api/dlq", "", nil)
	if got != http.StatusOK || strings.Contains(body, "otp") || !strings.Contains(body, strings.Repeat("x", 300)) {
		t.Errorf("dlq list: %d %s; want the whole reason and no payload", got, body)
	}
	if got, _ := f.do(t, "GET", "/console/api/dlq/stale", "", nil); got != http.StatusUnauthorized {
		t.Errorf("payload without the token: %d, want 401", got)
	}
	got, body = f.do(t, "GET", "/console/api/dlq/stale", "", map[string]string{"Authorization": "Bearer tok"})
	if got != http.StatusOK || !strings.Contains(body, `"otp":"123"`) {
		t.Errorf("payload with the token: %d %s", got, body)
	}
	if !strings.Contains(f.log.String(), `action="show payload" detail=stale result=done`) {
		t.Errorf("the payload view is not in the audit log:\n%s", f.log.String())
	}
	if got, _ := f.do(t, "GET", "/console/api/dlq/nope", "", map[string]string{"Authorization": "Bearer tok"}); got != http.StatusNotFound {
		t.Errorf("payload of an unknown id: %d, want 404", got)
	}
	// Two hours on, "stale" has expired: requeue --all leaves it.
	res, err := Requeue(ctx, f.q, now.Add(2*time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requeued != 1 || len(res.SkippedExpired) != 1 || res.SkippedExpired[0] != "stale" {
		t.Errorf("requeue all: %+v; want 1 requeued and stale left", res)
	}
	dead, err := f.q.ListDead(ctx, 10)
	if err != nil || len(dead) != 1 || dead[0].Job.ID != "stale" {
		t.Errorf("dead letters after the requeue: %v, %v; want stale alone", dead, err)
	}
}

// deadLetter enqueues jobs with ids and dead-letters them.
func (f *fixture) deadLetter(t *testing.T, ids ...string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		if _, err := f.q.Enqueue(ctx, &queue.Job{ID: id, Lane: "default", Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	f.deadLetterEnqueued(t, len(ids))
}

// deadLetterEnqueued fetches n jobs enqueued to lane default and
// dead-letters them.
func (f *fixture) deadLetterEnqueued(t *testing.T, n int) {
	t.Helper()
	queuetest.DeadLetterN(t, f.q, "default", n, "provider answered 400", 10*time.Second)
}

// Both backends delete dead letters (through Locate and Cancel): the page's
// Delete and Purge buttons are on, and purge deletes.
func TestDeleteEnabled(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) {
			f := newFixtureOn(t, "tok", backend)
			f.deadLetter(t, "d1", "d2", "d3")
			got, body := f.do(t, "GET", "/console/api/state", "", nil)
			if got != http.StatusOK || !strings.Contains(body, `"delete_enabled":true`) {
				t.Errorf("state on %s: %d %s; want delete_enabled true", backend, got, body)
			}
			jsonTok := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer tok"}
			if got, body := f.do(t, "POST", "/console/api/dlq/delete", `{"ids":["d2"]}`, jsonTok); got != http.StatusOK || !strings.Contains(body, `"deleted":1`) {
				t.Errorf("delete d2: %d %s; want 200, deleted 1", got, body)
			}
			if got, body := f.do(t, "POST", "/console/api/dlq/purge", `{}`, jsonTok); got != http.StatusOK || !strings.Contains(body, `"deleted":2`) {
				t.Errorf("purge: %d %s; want 200, deleted 2", got, body)
			}
			if dead, err := f.q.ListDead(context.Background(), 10); err != nil || len(dead) != 0 {
				t.Errorf("dead letters after the purge: %d, %v; want none", len(dead), err)
			}
		})
	}
}

// requeue --all works through the dead letters a page at a time until only
// the expired ones are left, even when more expired ones than a page sit
// in front.
func TestRequeueAllPages(t *testing.T) {
	f := newFixture(t, "tok")
	defer func(p int) { requeuePage = p }(requeuePage)
	requeuePage = 10
	ctx := context.Background()
	now := time.Now()
	var ids []string
	for i := range 45 {
		j := &queue.Job{ID: fmt.Sprintf("j%02d", i), Lane: "default", Payload: json.RawMessage(`{}`)}
		if i < 15 {
			j.ExpiresAt = now.Add(time.Hour) // expired two hours on
		}
		ids = append(ids, j.ID)
		if _, err := f.q.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	f.deadLetterEnqueued(t, len(ids))
	res, err := Requeue(ctx, f.q, now.Add(2*time.Hour), nil)
	if err != nil || res.Requeued != 30 || len(res.SkippedExpired) != 15 {
		t.Fatalf("requeue all: %d requeued, %d left expired, %v; want 30, 15, nil", res.Requeued, len(res.SkippedExpired), err)
	}
	dead, err := f.q.ListDead(ctx, 100)
	if err != nil || len(dead) != 15 {
		t.Fatalf("dead letters after: %d, %v; want the 15 expired", len(dead), err)
	}
	for _, d := range dead {
		if !d.Job.Expired(now.Add(2 * time.Hour)) {
			t.Errorf("%s is left and has not expired", d.Job.ID)
		}
	}
}

// A purge works through the dead letters a page at a time until none is
// left, on both backends.
func TestPurgePages(t *testing.T) {
	defer func(p int) { deletePage = p }(deletePage)
	deletePage = 7
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) {
			f := newFixtureOn(t, "tok", backend)
			var ids []string
			for i := range 30 {
				ids = append(ids, fmt.Sprintf("p%02d", i))
			}
			f.deadLetter(t, ids...)
			n, err := DeleteDead(context.Background(), f.q, nil)
			if n != 30 || err != nil {
				t.Errorf("purge: %d, %v; want 30, nil", n, err)
			}
			if dead, err := f.q.ListDead(context.Background(), 100); err != nil || len(dead) != 0 {
				t.Errorf("dead letters after the purge: %d, %v; want none", len(dead), err)
			}
		})
	}
}

// cancelAfter is a queue whose context ends after its k-th Cancel.
type cancelAfter struct {
	queue.Queue
	k      int
	cancel context.CancelFunc
}

func (q *cancelAfter) Locate(ctx context.Context, id string) (queue.Location, error) {
	return q.Queue.(queue.Locator).Locate(ctx, id)
}

func (q *cancelAfter) Cancel(ctx context.Context, id string) (queue.State, error) {
	st, err := q.Queue.(queue.Canceler).Cancel(ctx, id)
	if q.k--; q.k == 0 {
		q.cancel()
	}
	return st, err
}

// A purge whose context ends stops there: it says how many it deleted and
// gives one error, not one per dead letter left.
func TestPurgeStopsAtContextEnd(t *testing.T) {
	f := newFixture(t, "tok")
	var ids []string
	for i := range 20 {
		ids = append(ids, fmt.Sprintf("c%02d", i))
	}
	f.deadLetter(t, ids...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := DeleteDead(ctx, &cancelAfter{Queue: f.q, k: 5, cancel: cancel}, nil)
	if n != 5 || !errors.Is(err, context.Canceled) || strings.Count(err.Error(), "context canceled") != 1 {
		t.Errorf("purge cut off after 5: %d, %v; want 5 and one context canceled", n, err)
	}
	if dead, err := f.q.ListDead(context.Background(), 100); err != nil || len(dead) != 15 {
		t.Errorf("dead letters left: %d, %v; want 15", len(dead), err)
	}
}
