package e2e_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// A bad configuration stops start-up with exit 2 and every problem named.
func TestBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	bad := `
queue:
  name: "sms queue"
  lanes: [{name: vip, weight: -3}]
  policy: fastest
  visibility_timeout: soon
pacer: {rate: -5}
sink: {url: "not a url", max_in_flight: 0}
colour: blue
`
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "dispatcher"), "--config", path)
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err == nil || code != 2 {
		t.Fatalf("exit %d (%v), want 2; stderr:\n%s", code, err, stderr.String())
	}
	for _, key := range []string{"queue.name", "queue.lanes[0].weight", "queue.policy", "queue.visibility_timeout", "pacer.rate", "sink.url", "colour"} {
		if !strings.Contains(stderr.String(), key) {
			t.Errorf("stderr does not name %s:\n%s", key, stderr.String())
		}
	}
}

// The metrics of the design appear on /metrics and pass the Prometheus
// linter; /healthz and /readyz answer, and /readyz fails while Redis is down.
func TestMetricsAndHealth(t *testing.T) {
	c := newCluster(t, "redis", 200, "SLUICE_QUEUE_BACKOFF_MIN=100ms")
	n := 0
	c.prov.SetResponder(func(a mockprovider.Arrival) mockprovider.Answer {
		n++
		switch n {
		case 5:
			return mockprovider.Answer{Status: 429, RetryAfter: time.Second}
		case 10:
			return mockprovider.Answer{Status: 500}
		case 15:
			return mockprovider.Answer{Status: 400}
		}
		return mockprovider.Answer{Status: 200}
	})
	c.enqueue("m", "bob", 30)
	c.enqueue("mv", "alice", 5)
	p := c.start(1)[0]
	var base string
	select {
	case u := <-p.metric:
		base = strings.TrimSuffix(u, "/metrics")
	case <-time.After(10 * time.Second):
		t.Fatal("no metrics URL logged within 10s")
	}
	c.waitDelivered(34, 30*time.Second)

	body := get(t, base+"/metrics", 200)
	for _, name := range []string{
		"sluice_jobs_total", "sluice_queue_depth", "sluice_queue_oldest_age_seconds", "sluice_queue_dead_letters",
		"sluice_wait_seconds_bucket", "sluice_provider_latency_seconds_bucket", "sluice_in_flight",
		"sluice_retries_total", "sluice_dead_letters_total", "sluice_pacer_slots_granted_total",
		"sluice_pacer_slot_wait_seconds_bucket", "sluice_pacer_rate", "sluice_throttle_events_total",
		"sluice_backend_errors_total",
	} {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}
	for _, want := range []string{`outcome="throttled"} 1`, `sluice_throttle_events_total 1`,
		`reason="permanent"} 1`, `sluice_pacer_rate{kind="configured"} 200`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	get(t, base+"/healthz", 200)
	get(t, base+"/readyz", 200)
	c.redis.Kill()
	eventually(t, 10*time.Second, "/readyz failing while Redis is down", func() bool {
		return status(base+"/readyz") == http.StatusServiceUnavailable
	})
	get(t, base+"/healthz", 200)
}

func get(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %s", url, resp.StatusCode, want, b)
	}
	return string(b)
}

func status(url string) int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
