package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a bytes.Buffer safe to write and read concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var urlRE = regexp.MustCompile(`url=(\S+)`)

// waitFor polls cond every 10ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, 10*time.Millisecond, what, cond)
}

func TestBadFlagsExit2NamingTheFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "bogus"},
		{[]string{"--latency", "soon"}, "latency"},
		{[]string{"--throttle-share", "2"}, "throttle-share"},
		{[]string{"--error-share", "0.6", "--reject-share", "0.6"}, "at most 1"},
		{[]string{"--listen", "0.0.0.0:8080"}, "listen"},
		{[]string{"--path", "/reset"}, "path"},
		{[]string{"--retry-after", "0s"}, "retry-after"},
		{[]string{"--cap", "-5"}, "cap"},
		{[]string{"stray"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: got exit %d and %q, want exit 2 naming %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}

func TestHelpExits0(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "--throttle-share") {
		t.Errorf("--help: got exit %d and %q, want 0 and the flags", code, stderr.String())
	}
}

// postJob sends one job and returns the status.
func postJob(t *testing.T, c *http.Client, url, id string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"to":"+15550100"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Sluice-Job-Id", id)
	req.Header.Set("X-Sluice-Lane", "vip")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestRunServesThenReportsAndCharts(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "chart.svg")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--cap", "100", "--chart", chart}, &stdout, &stderr)
	}()
	waitFor(t, 10*time.Second, "the listening log line", func() bool { return urlRE.MatchString(stderr.String()) })
	url := urlRE.FindStringSubmatch(stderr.String())[1]

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, id := range []string{"a", "b", "a"} {
		if s := postJob(t, c, url, id); s != 200 {
			t.Fatalf("POST %s: got %d, want 200", id, s)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit: got %d, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return within 20s of the signal")
	}
	for _, want := range []string{"arrivals       3", "duplicates 1 (1 jobs)", "vip", "cap 100/s"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
	if b, err := os.ReadFile(chart); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("chart: %v, %d bytes without <svg", err, len(b))
	}
}

// TestBinaryStopsOnSIGTERM builds the command and checks the signal path:
// SIGTERM gives the report on stdout and exit status 0.
func TestBinaryStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mockprovider")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--listen", "127.0.0.1:0", "--throttle-share", "1")
	var stdout bytes.Buffer
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }() // no-ops once it has exited
	waitFor(t, 20*time.Second, "the listening log line", func() bool { return urlRE.MatchString(stderr.String()) })
	url := urlRE.FindStringSubmatch(stderr.String())[1]

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	if s := postJob(t, &http.Client{Transport: tr, Timeout: 10 * time.Second}, url, "j1"); s != 429 {
		t.Errorf("POST with --throttle-share 1: got %d, want 429", s)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v, want status 0", err)
	}
	if !strings.Contains(stdout.String(), "429: 1") {
		t.Errorf("report on stdout lacks the 429:\n%s", stdout.String())
	}
}
