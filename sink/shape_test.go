package sink

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/queue"
)

// recordingProvider starts the mock provider on a free loopback port,
// keeping bodies and headers, and stops it when the test ends.
func recordingProvider(t *testing.T) *mockprovider.Provider {
	t.Helper()
	p, err := mockprovider.New(mockprovider.Config{Listen: "127.0.0.1:0", KeepBodies: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// sendOne sends j through a sink for cfg and returns the one arrival.
func sendOne(t *testing.T, p *mockprovider.Provider, cfg HTTPConfig, j *queue.Job) mockprovider.Arrival {
	t.Helper()
	s := newSink(t, cfg)
	if err := s.Send(t.Context(), j); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := p.Arrivals()
	if len(got) != 1 {
		t.Fatalf("arrivals: got %d, want 1", len(got))
	}
	return got[0]
}

func smsJob(payload string) *queue.Job {
	return &queue.Job{ID: "job-1", Key: "otp-42", Lane: "vip", Attempt: 2,
		EnqueuedAt: time.Date(2026, 11, 21, 10, 0, 0, 5, time.UTC), Payload: json.RawMessage(payload)}
}

// checkHeaders compares the headers the provider received with want,
// exactly: nothing more, nothing less (Accept-Encoding and Content-Length
// are Go's HTTP client's own and checked apart).
func checkHeaders(t *testing.T, got http.Header, want map[string]string) {
	t.Helper()
	got = got.Clone()
	got.Del("Accept-Encoding")
	got.Del("Content-Length")
	for k, v := range want {
		if g := got.Values(k); len(g) != 1 || g[0] != v {
			t.Errorf("header %s: got %q, want %q", k, g, v)
		}
		got.Del(k)
	}
	for k, v := range got {
		t.Errorf("header %s: got %q, want none", k, v)
	}
}

func writeSecret(t *testing.T, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The default shape, json, with a job's own method, path, query and
// headers: exactly these bytes and headers reach the provider.
func TestShapeJSONWithJobRequest(t *testing.T) {
	p := recordingProvider(t)
	j := smsJob(`{"to":"+15550100","text":"hi"}`)
	j.Request = &queue.Request{Method: "PUT", Path: "/v2/messages", Query: map[string]string{"priority": "high", "a b": "c&d"},
		Headers: map[string]string{"x-tenant": "acme"}}
	a := sendOne(t, p, HTTPConfig{URL: p.URL() + "?api_key=k1", Headers: Headers{"X-Api-Version": "3"}}, j)
	if a.Method != "PUT" || a.URI != "/send/v2/messages?a+b=c%26d&api_key=k1&priority=high" {
		t.Errorf("request: got %s %s, want PUT /send/v2/messages?a+b=c%%26d&api_key=k1&priority=high", a.Method, a.URI)
	}
	if string(a.Body) != `{"to":"+15550100","text":"hi"}` {
		t.Errorf("body: got %q, want the payload as is", a.Body)
	}
	checkHeaders(t, a.Header, map[string]string{
		"Content-Type": "application/json", "User-Agent": "sluice", "X-Api-Version": "3", "X-Tenant": "acme",
		"Idempotency-Key": "otp-42", "X-Sluice-Job-Id": "job-1", "X-Sluice-Lane": "vip", "X-Sluice-Attempt": "2",
		"X-Sluice-Enqueued-At": "2026-11-21T10:00:00.000000005Z",
	})
}

// form: the payload's top-level fields, form-encoded in name order, with
// basic auth from a file; the secret shows nowhere but on the wire.
func TestShapeFormWithBasicAuth(t *testing.T) {
	p := recordingProvider(t)
	cfg := HTTPConfig{URL: p.URL(), Encoding: EncodingForm,
		Auth: Auth{Type: AuthBasic, Username: "AC123", SecretFile: writeSecret(t, "s3cr3t-token")}}
	j := smsJob(`{"To":"+15550100","From":"sluice","Body":"hi there & bye","Segments":2,"Flash":false,"Tags":["a","b"],"Empty":null}`)
	a := sendOne(t, p, cfg, j)
	want := "Body=hi+there+%26+bye&Empty=&Flash=false&From=sluice&Segments=2&Tags=a&Tags=b&To=%2B15550100"
	if a.Method != "POST" || a.URI != "/send" || string(a.RawBody) != want {
		t.Errorf("request: got %s %s %q, want POST /send %q", a.Method, a.URI, a.RawBody, want)
	}
	checkHeaders(t, a.Header, map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "User-Agent": "sluice",
		"Authorization":   "Basic " + base64.StdEncoding.EncodeToString([]byte("AC123:s3cr3t-token")),
		"Idempotency-Key": "otp-42", "X-Sluice-Job-Id": "job-1", "X-Sluice-Lane": "vip", "X-Sluice-Attempt": "2",
		"X-Sluice-Enqueued-At": "2026-11-21T10:00:00.000000005Z",
	})
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("cfg", "sink", cfg)
	if shown := logged.String() + fmt.Sprintf("%v %+v", cfg, cfg.Auth); strings.Contains(shown, "s3cr3t") {
		t.Errorf("the secret shows in the logged or printed configuration: %s", shown)
	}
}

// raw: a string payload's text with the job's content type, bearer auth
// from the environment; a non-string payload goes as its JSON with
// sink.content_type.
func TestShapeRawWithBearerAuth(t *testing.T) {
	p := recordingProvider(t)
	env := map[string]string{"PROVIDER_TOKEN": "tok-123"}
	cfg := HTTPConfig{URL: p.URL(), Encoding: EncodingRaw, ContentType: "application/vnd.sms+json",
		Auth: Auth{Type: AuthBearer, SecretEnv: "PROVIDER_TOKEN", LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}}
	j := smsJob(`"<sms to=\"+1555\">hi\nthere</sms>"`)
	j.Request = &queue.Request{ContentType: "application/xml"}
	a := sendOne(t, p, cfg, j)
	if string(a.RawBody) != "<sms to=\"+1555\">hi\nthere</sms>" {
		t.Errorf("body: got %q, want the string's text", a.RawBody)
	}
	checkHeaders(t, a.Header, map[string]string{
		"Content-Type": "application/xml", "User-Agent": "sluice", "Authorization": "Bearer tok-123",
		"Idempotency-Key": "otp-42", "X-Sluice-Job-Id": "job-1", "X-Sluice-Lane": "vip", "X-Sluice-Attempt": "2",
		"X-Sluice-Enqueued-At": "2026-11-21T10:00:00.000000005Z",
	})
	p.Reset()
	a = sendOne(t, p, cfg, smsJob(`{"to":"+1555"}`))
	if string(a.Body) != `{"to":"+1555"}` || a.Header.Get("Content-Type") != "application/vnd.sms+json" {
		t.Errorf("object payload: got %q with %q, want the JSON with sink.content_type", a.Body, a.Header.Get("Content-Type"))
	}
}

// A job may go to a host listed in sink.allowed_hosts, without sink.url's
// credentials and query; any other host is refused by Check (at enqueue)
// and by Send (dead-lettered, nothing sent).
func TestShapeAllowedHosts(t *testing.T) {
	p := recordingProvider(t)
	_, port, _ := strings.Cut(p.Addr().String(), ":")
	base := strings.Replace(p.URL(), "http://", "http://user:pw@", 1) + "?api_key=k1"
	cfg := HTTPConfig{URL: base, AllowedHosts: []string{"localhost"}}
	s := newSink(t, cfg)

	other := smsJob(`{"to":"+1555"}`)
	other.Request = &queue.Request{URL: "http://localhost:" + port + "/send/other", Query: map[string]string{"api_key": "mine"}}
	if err := s.Send(t.Context(), other); err != nil {
		t.Fatalf("Send to an allowed host: %v", err)
	}
	a := p.Arrivals()[0]
	if a.URI != "/send/other?api_key=mine" || a.Header.Get("Authorization") != "" {
		t.Errorf("allowed host: got %s with Authorization %q, want /send/other?api_key=mine without sink.url's credentials",
			a.URI, a.Header.Get("Authorization"))
	}

	evil := smsJob(`{"to":"+1555"}`)
	evil.Request = &queue.Request{URL: "http://evil.example:" + port + "/steal"}
	err := s.Bounds().Check(evil)
	var fe *queue.FieldError
	if !errors.As(err, &fe) || fe.Field != "request.url" || !strings.Contains(fe.Reason, "evil.example") ||
		!strings.Contains(fe.Reason, "sink.allowed_hosts") || !errors.Is(err, queue.ErrInvalidJob) {
		t.Errorf("Check of another host: got %v, want a FieldError naming request.url and sink.allowed_hosts", err)
	}
	err = s.Send(t.Context(), evil)
	if !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "request.url: host evil.example") {
		t.Errorf("Send to another host: got %v, want ErrPermanent naming request.url", err)
	}
	if n, _ := p.Counts(); n != 1 {
		t.Errorf("arrivals after the refused job: got %d, want 1", n)
	}
}

// Check names every field a job may not set.
func TestBoundsCheck(t *testing.T) {
	b, err := NewBounds(HTTPConfig{URL: "https://api.example.com/send?key=k", Encoding: EncodingForm,
		Headers: Headers{"X-Api-Key": "secret"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		req     *queue.Request
		payload string
		field   string // "" for none
	}{
		{"fine", &queue.Request{Path: "/x", Query: map[string]string{"q": "1"}, Headers: map[string]string{"X-T": "a"}}, `{"a":"b"}`, ""},
		{"same host by url", &queue.Request{URL: "https://API.example.com/other"}, `{"a":"b"}`, ""},
		{"other host", &queue.Request{URL: "https://evil.example/"}, `{"a":"b"}`, "request.url"},
		{"base query", &queue.Request{Query: map[string]string{"key": "mine"}}, `{"a":"b"}`, "request.query.key"},
		{"static header", &queue.Request{Headers: map[string]string{"x-api-key": "mine"}}, `{"a":"b"}`, "request.headers.x-api-key"},
		{"content type with form", &queue.Request{ContentType: "text/plain"}, `{"a":"b"}`, "request.content_type"},
		{"form nested object", nil, `{"a":{"b":1}}`, "payload"},
		{"form not an object", nil, `[1,2]`, "payload"},
		{"form nested, but GET sends no body", &queue.Request{Method: "GET"}, `{"a":{"b":1}}`, ""},
	}
	for _, tt := range tests {
		err := b.Check(&queue.Job{Request: tt.req, Payload: json.RawMessage(tt.payload)})
		var fe *queue.FieldError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: got %v, want nil", tt.name, err)
		case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
			t.Errorf("%s: got %v, want a FieldError naming %s", tt.name, err, tt.field)
		}
	}
}

// The auth keys are checked with their names, and no message shows the secret.
func TestAuthConfig(t *testing.T) {
	secret := writeSecret(t, "hunter2")
	noEnv := func(string) (string, bool) { return "", false }
	tests := []struct {
		name string
		auth Auth
		url  string
		want string // "" for valid
	}{
		{"basic from file", Auth{Type: AuthBasic, Username: "u", SecretFile: secret}, "", ""},
		{"basic without user", Auth{Type: AuthBasic, SecretFile: secret}, "", "sink.auth.username: required with type basic"},
		{"no secret", Auth{Type: AuthBearer}, "", "sink.auth.secret_file: required with type bearer: secret_file or secret_env"},
		{"both", Auth{Type: AuthBearer, SecretFile: secret, SecretEnv: "X"}, "", "give secret_file or secret_env, not both"},
		{"env unset: read when the sink is built", Auth{Type: AuthBearer, SecretEnv: "NOPE", LookupEnv: noEnv}, "", ""},
		{"file missing", Auth{Type: AuthBearer, SecretFile: "/nonexistent/x"}, "", "sink.auth.secret_file: open /nonexistent/x"},
		{"unknown type", Auth{Type: "digest"}, "", `sink.auth.type: must be none, basic or bearer, got "digest"`},
		{"keys without type", Auth{Username: "u"}, "", "sink.auth.type: required"},
		{"url credentials too", Auth{Type: AuthBearer, SecretFile: secret}, "http://u:p@h/", "sink.url: has credentials, and sink.auth is set"},
	}
	for _, tt := range tests {
		cfg := HTTPConfig{URL: "http://127.0.0.1:9/send", Auth: tt.auth}
		if tt.url != "" {
			cfg.URL = tt.url
		}
		cfg.SetDefaults()
		err := cfg.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: got %v, want nil", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		case err != nil && strings.Contains(err.Error(), "hunter2"):
			t.Errorf("%s: the error shows the secret: %v", tt.name, err)
		}
	}
	_, err := NewHTTP(HTTPConfig{URL: "http://127.0.0.1:9/send", Auth: Auth{Type: AuthBearer, SecretEnv: "NOPE", LookupEnv: noEnv}})
	if err == nil || !strings.Contains(err.Error(), "sink.auth.secret_env: environment variable NOPE is not set or empty") {
		t.Errorf("NewHTTP with the secret's variable unset: got %v, want sink.auth.secret_env named", err)
	}
}

// A job sent without a body (GET, DELETE) is written at most once as well:
// net/http would write a bodiless request with an Idempotency-Key again on
// its own when a reused connection breaks after it went out.
func TestBodilessWrittenOncePerSend(t *testing.T) {
	for _, method := range []string{"GET", "DELETE"} {
		var arrivals atomic.Int64
		p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method || r.ContentLength > 0 {
				t.Errorf("request: got %s with %d body bytes, want %s without a body", r.Method, r.ContentLength, method)
			}
			if arrivals.Add(1) == 2 { // the second request: hang up without an answer
				if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
					_ = conn.Close()
				}
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		h := newSink(t, HTTPConfig{URL: p.URL + "/send", Method: method})
		if err := h.Send(t.Context(), smsJob(`{}`)); err != nil {
			t.Fatal(err)
		}
		if err := h.Send(t.Context(), smsJob(`{}`)); !errors.Is(err, ErrTransient) {
			t.Errorf("%s on a connection dropped after the request: got %v, want a transient error", method, err)
		}
		if n := arrivals.Load(); n != 2 {
			t.Errorf("%s: the provider got %d requests for 2 sends, want 2", method, n)
		}
	}
}
