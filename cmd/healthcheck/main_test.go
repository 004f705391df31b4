package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server answers every request with status and body.
func server(t *testing.T, status int, body string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s
}

// closedURL is a loopback URL on which nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr + "/healthz"
}

func TestExitCodeFollowsTheAnswer(t *testing.T) {
	ok := server(t, http.StatusOK, "ok\n")
	noContent := server(t, http.StatusNoContent, "")
	notReady := server(t, http.StatusServiceUnavailable, "not ready: queue: connection refused")
	redirect := server(t, http.StatusFound, "")
	cases := []struct {
		name     string
		args     []string
		want     int
		wantErrs string
	}{
		{"200", []string{ok.URL + "/healthz"}, 0, ""},
		{"204", []string{noContent.URL}, 0, ""},
		{"503 quotes the answer", []string{notReady.URL + "/readyz"}, 1, "503 Service Unavailable: not ready: queue: connection refused"},
		{"a redirect is not followed", []string{redirect.URL}, 1, "302 Found"},
		{"nothing listening", []string{closedURL(t)}, 1, "connection refused"},
		{"two URLs", []string{ok.URL, ok.URL}, 2, "at most one URL"},
		{"not http", []string{"ftp://127.0.0.1/x"}, 2, "want http://"},
		{"no host", []string{"/healthz"}, 2, "want http://"},
		{"bad timeout", []string{"--timeout", "0s", ok.URL}, 2, "--timeout: must be positive"},
		{"unknown flag", []string{"--nope"}, 2, "flag provided but not defined"},
		{"help", []string{"--help"}, 0, "usage: healthcheck"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got := run(context.Background(), c.args, &stderr)
			if got != c.want {
				t.Errorf("run(%q) = %d, want %d; stderr: %s", c.args, got, c.want, stderr.String())
			}
			if c.wantErrs != "" && !strings.Contains(stderr.String(), c.wantErrs) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), c.wantErrs)
			}
			if c.wantErrs == "" && stderr.Len() > 0 {
				t.Errorf("stderr = %q, want nothing on success", stderr.String())
			}
		})
	}
}

func TestTimeoutBoundsASlowAnswer(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	var stderr bytes.Buffer
	start := time.Now()
	got := run(context.Background(), []string{"--timeout", "100ms", slow.URL}, &stderr)
	if got != 1 {
		t.Fatalf("run against a server that never answers = %d, want 1; stderr: %s", got, stderr.String())
	}
	if !strings.Contains(stderr.String(), "context deadline exceeded") {
		t.Errorf("stderr = %q, want the deadline named", stderr.String())
	}
	// Generous: the point is that the check does not hang until the server
	// gives up, not how fast it is.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("run took %s with --timeout 100ms", d)
	}
}

func TestDefaultURLIsTheDispatchersLiveness(t *testing.T) {
	target, timeout, err := parseArgs(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "http://" + config.DefaultMetricsListen + "/healthz"; target != want || timeout != DefaultTimeout {
		t.Errorf("parseArgs() = %q, %s; want the dispatcher's /healthz on 9464 and %s", target, timeout, DefaultTimeout)
	}
}
