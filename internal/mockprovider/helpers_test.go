package mockprovider_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// start runs a provider on a free loopback port until the test ends.
func start(t *testing.T, cfg mockprovider.Config) *mockprovider.Provider {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	p, err := mockprovider.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// newClient returns an HTTP client whose connections close when the test ends.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// reply is what the provider answered.
type reply struct {
	status int
	header http.Header
	body   string
}

// post sends body to url with the given headers.
func post(t *testing.T, c *http.Client, url, body string, headers map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// get fetches url and returns its status and body.
func get(t *testing.T, c *http.Client, url string) (int, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return resp.StatusCode, b
}

// jobHeaders are the headers of a job as the sink sends them.
func jobHeaders(id, lane string, attempt int, enq time.Time) map[string]string {
	return map[string]string{
		mockprovider.HeaderJobID:          id,
		mockprovider.HeaderLane:           lane,
		mockprovider.HeaderAttempt:        strconv.Itoa(attempt),
		mockprovider.HeaderIdempotencyKey: "key-" + id,
		mockprovider.HeaderEnqueuedAt:     enq.Format(time.RFC3339Nano),
	}
}
