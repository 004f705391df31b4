package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/pacer"
)

// serve-api refuses to start, exit 2, without a usable token or with bad
// api: keys, naming the key, before it connects to anything.
func TestServeAPIUsageErrors(t *testing.T) {
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--queue", "sms", "--rate", "1", "--sink-url", "http://127.0.0.1:1/", "--redis-url", "redis://127.0.0.1:1/0"}
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "api.token_file: required"},
		{map[string]string{"SLUICE_API_TOKEN_FILE": "/no/such/token"}, "api.token_file: open /no/such/token"},
		{map[string]string{"SLUICE_API_TOKEN_FILE": short}, "must hold one token of at least 16 bytes"},
		{map[string]string{"SLUICE_API_LISTEN": "8480"}, "api.listen: must be host:port"},
		{map[string]string{"SLUICE_API_MAX_BATCH": "-1"}, "api.max_batch: must be between 1 and 100000"},
	} {
		t.Run(tt.want, func(t *testing.T) { // each case's environment ends with it
			code, _, stderr := runCmd(t, tt.env, append([]string{"serve-api"}, base...)...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("serve-api with %v: exit %d, stderr %q; want 2 and %q", tt.env, code, stderr, tt.want)
			}
			if strings.Contains(stderr, "abc") {
				t.Errorf("serve-api with %v: the token file's content shows: %q", tt.env, stderr)
			}
		})
	}
}

// serve-api needs only the queue, Redis and its token: without pacer.rate,
// and with sink.url but without the provider's secret file, it stores a
// job, refuses one out of the sink's bounds, reports the pacer's state and
// exits 0 when its context ends.
func TestServeAPIWithoutPacerRateOrProviderSecret(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	tokenFile := filepath.Join(t.TempDir(), "token")
	const token = "0123456789abcdef0123"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"SLUICE_API_TOKEN_FILE": tokenFile, "SLUICE_SINK_AUTH_TYPE": "bearer",
		"SLUICE_SINK_AUTH_SECRET_FILE": "/no/such/provider-secret"} {
		t.Setenv(k, v)
	}
	if err := pacerControls(t, srv).SetRate(t.Context(), 42); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := newURLWatch()
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"serve-api", "--queue", "apitest", "--redis-url", srv.URL(),
			"--sink-url", "https://sms.example.com/send", "--api-listen", "127.0.0.1:0"}, io.Discard, stderr)
	}()
	var base string
	select {
	case base = <-stderr.url:
	case code := <-exit:
		t.Fatalf("serve-api exited with %d before serving: %s", code, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("serve-api logged no URL within 20s: %s", stderr.String())
	}

	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: decode the answer: %v", method, path, err)
		}
		return resp.StatusCode, out
	}
	if code, out := call("POST", "/jobs", `{"payload":{"to":"+15550100"}}`); code != http.StatusCreated {
		t.Errorf("POST a job: status %d %v, want 201", code, out)
	}
	if code, out := call("POST", "/jobs", `{"request":{"url":"https://evil.example/x"},"payload":{}}`); code != http.StatusBadRequest {
		t.Errorf("POST a job for another host: status %d %v, want 400 (out of the sink's bounds)", code, out)
	}
	code, out := call("GET", "", "")
	rate, _ := out["rate"].(map[string]any)
	if code != http.StatusOK || rate["override"] != 42.0 || rate["effective"] != 42.0 || rate["replicas"] != 0.0 {
		t.Errorf("GET the status: %d %v; want 200 with rate override and effective 42, replicas 0", code, out)
	}

	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("serve-api exited with %d, want 0: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve-api did not stop within 20s of its context's end")
	}
}

// pacerControls returns the controls of the pacer named apitest on srv.
func pacerControls(t *testing.T, srv *testredis.Server) *pacer.Controls {
	t.Helper()
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	c, err := pacer.NewControls(rdb, "apitest")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// urlWatch is a log writer, safe for concurrent use, that sends the URL of
// the first "sluice: ingest api" line on url.
type urlWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	sent bool
	url  chan string
}

func newURLWatch() *urlWatch { return &urlWatch{url: make(chan string, 1)} }

var ingestURL = regexp.MustCompile(`msg="sluice: ingest api" url=(\S+)`)

func (w *urlWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := ingestURL.FindSubmatch(w.buf.Bytes()); m != nil && !w.sent {
		w.sent = true
		w.url <- string(m[1])
	}
	return len(p), nil
}

func (w *urlWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
