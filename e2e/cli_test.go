package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/queue"
)

// adminRun runs a dispatcher admin command against the cluster with the
// cluster's environment and env added, and returns its exit code, stdout
// and stderr.
func (c *cluster) adminRun(env []string, args ...string) (int, string, string) {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(bin, "dispatcher"), append([]string{"--config", filepath.Join("..", "configs", "sluice.yaml")}, args...)...)
	cmd.Env = append(append(cleanEnv(), c.env...), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		c.t.Fatalf("dispatcher %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// statusJSON is the part of `status --json` the tests read.
type statusJSON struct {
	Queue   string `json:"queue"`
	Backend string `json:"backend"`
	Lanes   []struct {
		Name     string `json:"name"`
		Ready    int64  `json:"ready"`
		InFlight int64  `json:"in_flight"`
	} `json:"lanes"`
	DeadLetters int64  `json:"dead_letters"`
	QueueError  string `json:"queue_error"`
	Pacer       *struct {
		ConfiguredRate float64 `json:"configured_rate"`
		EffectiveRate  float64 `json:"effective_rate"`
		Paused         bool    `json:"paused"`
	} `json:"pacer"`
	Replicas []struct {
		ID      string           `json:"id"`
		Sending int              `json:"sending"`
		Held    int              `json:"held"`
		Admin   string           `json:"admin"`
		Sent    map[string]int64 `json:"sent"`
	} `json:"replicas"`
}

func decodeJSON[T any](t *testing.T, what, s string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, s)
	}
	return v
}

// Every read command has --json, on both backends; dlq show gives the
// whole answer and the payload; requeue leaves expired jobs; job show
// finds a job; delete takes only dead letters; purge empties them.
func TestCLICommands(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) { testCLICommands(t, backend) })
	}
}

func testCLICommands(t *testing.T, backend string) {
	c := newCluster(t, backend, 200)
	long := `{"error":"invalid recipient","detail":"` + strings.Repeat("r", 200) + `"}`
	// The provider refuses cli-00001 once: requeued, it is delivered. (A job
	// refused again at once can be requeued twice by one natsq Requeue, which
	// scans the dead letters while the replica adds to them.)
	var refused atomic.Bool
	c.prov.SetResponder(func(a mockprovider.Arrival) mockprovider.Answer {
		if a.JobID == "cli-00001" && refused.CompareAndSwap(false, true) {
			return mockprovider.Answer{Status: 400, Body: long}
		}
		return mockprovider.Answer{Status: 200}
	})
	c.enqueue("cli", "bob", 20)
	c.start(1)
	eventually(t, 30*time.Second, "19 delivered and 1 dead letter", func() bool {
		code, out, _ := c.adminRun(nil, "status", "--json")
		return code == 0 && c.delivered() == 19 && decodeJSON[statusJSON](t, "status", out).DeadLetters == 1
	})

	var st statusJSON
	eventually(t, 10*time.Second, "status --json shows the replica's sent count", func() bool {
		_, out, _ := c.adminRun(nil, "status", "--json")
		st = decodeJSON[statusJSON](t, "status --json", out)
		return len(st.Replicas) == 1 && st.Replicas[0].Sent["default"] == 20
	})
	if st.Queue != c.name || st.Backend != backend || len(st.Lanes) != 2 || st.Lanes[0].Name != "vip" ||
		st.Pacer == nil || st.Pacer.ConfiguredRate != 200 || st.Replicas[0].Admin == "" {
		t.Errorf("status --json: %+v", st)
	}

	_, out, _ := c.adminRun(nil, "dlq", "list", "--json")
	list := decodeJSON[[]map[string]any](t, "dlq list --json", out)
	if len(list) != 1 || list[0]["id"] != "cli-00001" || !strings.Contains(list[0]["reason"].(string), strings.Repeat("r", 200)) {
		t.Errorf("dlq list --json: want cli-00001 with the whole answer:\n%s", out)
	}
	if _, ok := list[0]["payload"]; ok {
		t.Errorf("dlq list --json shows the payload:\n%s", out)
	}
	if code, out, errOut := c.adminRun(nil, "dlq", "show", "cli-00001"); code != 0 || !strings.Contains(out, strings.Repeat("r", 200)) ||
		!strings.Contains(out, "+15550000001") {
		t.Errorf("dlq show: exit %d, want the whole answer and the payload:\n%s%s", code, out, errOut)
	}
	_, out, _ = c.adminRun(nil, "dlq", "show", "cli-00001", "--json")
	if d := decodeJSON[map[string]any](t, "dlq show --json", out); d["payload"] == nil || d["attempt"] != 1.0 {
		t.Errorf("dlq show --json: %s", out)
	}
	if code, _, errOut := c.adminRun(nil, "dlq", "show", "nope"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("dlq show nope: exit %d %q; want 1, not found", code, errOut)
	}
	// job show: where a job is, with its attempts and last error.
	if code, out, errOut := c.adminRun(nil, "job", "show", "cli-00001"); code != 0 || !strings.Contains(out, "dead") ||
		!strings.Contains(out, "invalid recipient") {
		t.Errorf("job show of the dead letter: exit %d, want its state and last error:\n%s%s", code, out, errOut)
	}
	_, out, _ = c.adminRun(nil, "job", "show", "cli-00002", "--json")
	if loc := decodeJSON[map[string]any](t, "job show --json", out); loc["state"] != "unknown" {
		t.Errorf("job show --json of a delivered job: %s; want state unknown (delivered jobs are not kept)", out)
	}
	// dlq delete takes only dead letters.
	if code, _, errOut := c.adminRun(nil, "dlq", "delete", "cli-00002"); code != 1 || !strings.Contains(errOut, "not a dead letter") {
		t.Errorf("dlq delete of a job that is no dead letter: exit %d %q; want 1, not a dead letter", code, errOut)
	}
	code, out, errOut := c.adminRun(nil, "dlq", "requeue", "--all", "--json")
	if r := decodeJSON[map[string]any](t, "dlq requeue --json", out); code != 0 || r["requeued"] != 1.0 {
		t.Errorf("dlq requeue --all --json: exit %d %s %s", code, out, errOut)
	}
	c.waitDelivered(20, 30*time.Second)
	if code, out, errOut := c.adminRun(nil, "dlq", "purge"); code != 0 || !strings.Contains(out, "deleted 0") {
		t.Errorf("dlq purge of no dead letters: exit %d %q %q; want deleted 0", code, out, errOut)
	}
	if code, _, errOut := c.adminRun(nil, "dlq", "delete"); code != 2 || !strings.Contains(errOut, "give job ids, or --all alone") {
		t.Errorf("dlq delete with nothing: exit %d %q; want 2", code, errOut)
	}
}

// An expired dead letter stays put on requeue --all: requeued, it would be
// dead again at once.
func TestCLIRequeueLeavesExpired(t *testing.T) {
	c := newCluster(t, "redis", 200)
	c.prov.SetResponder(func(mockprovider.Arrival) mockprovider.Answer { return mockprovider.Answer{Status: 400} })
	ids := c.enqueueExpiring(t, "exp", 2, 3*time.Second)
	c.start(1)
	eventually(t, 30*time.Second, "2 dead letters", func() bool {
		_, out, _ := c.adminRun(nil, "status", "--json")
		return decodeJSON[statusJSON](t, "status", out).DeadLetters == 2
	})
	eventually(t, 10*time.Second, "the jobs expired", func() bool {
		_, out, _ := c.adminRun(nil, "dlq", "list", "--json")
		l := decodeJSON[[]map[string]any](t, "dlq list", out)
		return len(l) == 2 && l[0]["expired"] == true && l[1]["expired"] == true
	})
	code, out, errOut := c.adminRun(nil, "dlq", "requeue", "--all")
	if code != 0 || !strings.Contains(out, "requeued 0") || !strings.Contains(out, "left 2 expired") {
		t.Errorf("dlq requeue --all of expired jobs: exit %d\n%s%s", code, out, errOut)
	}
	_, out, _ = c.adminRun(nil, "dlq", "list")
	for _, id := range ids {
		if !strings.Contains(out, id) || !strings.Contains(out, "[expired]") {
			t.Errorf("dlq list after the requeue lacks %s marked expired:\n%s", id, out)
		}
	}
}

// With NATS stopped, status shows the pacer and the replicas, says the
// queue is unreachable, and exits 1; pause needs only Redis and works.
func TestCLIStatusNATSDown(t *testing.T) {
	c := newCluster(t, "nats", 100)
	c.start(1)
	eventually(t, 30*time.Second, "one live replica", func() bool {
		code, out, _ := c.adminRun(nil, "status", "--json")
		return code == 0 && len(decodeJSON[statusJSON](t, "status", out).Replicas) == 1
	})
	c.nats.Shutdown()
	code, out, errOut := c.adminRun(nil, "status")
	if code != 1 || !strings.Contains(out, "configured 100/s") || !strings.Contains(out, "live replicas  1") ||
		!strings.Contains(out, "UNREACHABLE: backend: open nats queue") || !strings.Contains(errOut, "queue unreachable") {
		t.Errorf("status with NATS down: exit %d; want 1, the pacer, the replica and the queue named unreachable:\n%s\n%s", code, out, errOut)
	}
	code, out, _ = c.adminRun(nil, "status", "--json")
	st := decodeJSON[statusJSON](t, "status --json", out)
	if code != 1 || st.QueueError == "" || st.Pacer == nil || len(st.Replicas) != 1 {
		t.Errorf("status --json with NATS down: exit %d %+v", code, st)
	}
	if code, out, errOut := c.adminRun(nil, "pause"); code != 0 || !strings.Contains(out, "paused") {
		t.Errorf("pause with NATS down: exit %d %s %s", code, out, errOut)
	}
}

// The admin commands need only the keys they use: no pacer.rate, no
// sink.url, no configuration file.
func TestCLIOnlyTheKeysUsed(t *testing.T) {
	c := newCluster(t, "redis", 100)
	cmd := exec.Command(filepath.Join(bin, "dispatcher"), "status", "--json")
	cmd.Env = append(cleanEnv(), "SLUICE_QUEUE_NAME="+c.name, "SLUICE_REDIS_URL="+c.redis.URL())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("status with queue.name and redis.url only: %v\n%s", err, out)
	}
	if st := decodeJSON[statusJSON](t, "status", string(out)); st.Queue != c.name || st.Pacer == nil {
		t.Errorf("status: %+v", st)
	}
}

// Two replicas started from the same configuration file on one host both
// run: metrics.listen is port 0 in configs/sluice.yaml, each writes the
// address it got to its --port-file, and status lists both with their
// consoles.
func TestCLITwoReplicasOneHost(t *testing.T) {
	c := newCluster(t, "redis", 100)
	c.env = slices.DeleteFunc(c.env, func(kv string) bool { return strings.HasPrefix(kv, "SLUICE_METRICS_LISTEN=") })
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "a.addr"), filepath.Join(dir, "b.addr")}
	c.start(1, "--port-file", files[0])
	c.start(1, "--port-file", files[1])
	addrs := make([]string, 2)
	for i, f := range files {
		eventually(t, 30*time.Second, "the port file "+f, func() bool {
			b, err := os.ReadFile(f)
			addrs[i] = strings.TrimSpace(string(b))
			return err == nil && addrs[i] != ""
		})
		res, err := http.Get("http://" + addrs[i] + "/console/")
		if err != nil {
			t.Fatalf("console at %s: %v", addrs[i], err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("console at %s: %d", addrs[i], res.StatusCode)
		}
	}
	if addrs[0] == addrs[1] {
		t.Fatalf("both replicas at %s", addrs[0])
	}
	var out string
	eventually(t, 30*time.Second, "status lists both replicas", func() bool {
		_, out, _ = c.adminRun(nil, "status")
		return strings.Contains(out, "live replicas  2")
	})
	for _, a := range addrs {
		if !strings.Contains(out, "http://"+a+"/console/") {
			t.Errorf("status lacks the console of %s:\n%s", a, out)
		}
	}
	// Every lane's and reason's counters exist at 0 before any job, and
	// the paused gauge says 0.
	m := metricsText(t, "http://"+addrs[0]+"/metrics")
	for _, want := range []string{`sluice_dead_letters_total{lane="vip",reason="expired"} 0`,
		`sluice_dead_letters_total{lane="default",reason="permanent"} 0`, "sluice_pacer_paused 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics before any job lacks %s", want)
		}
	}
	for _, p := range c.allProcs() {
		if code, ok := p.wait(0); ok {
			t.Errorf("%s exited %d", p.name, code)
		}
	}
}

// enqueueExpiring puts n jobs into the default lane that expire after ttl,
// ids prefix-0..n-1, and returns the ids.
func (c *cluster) enqueueExpiring(t *testing.T, prefix string, n int, ttl time.Duration) []string {
	t.Helper()
	jobs := make([]*queue.Job, n)
	ids := make([]string, n)
	for i := range jobs {
		ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
		jobs[i] = &queue.Job{ID: ids[i], Lane: "default", ExpiresAt: time.Now().Add(ttl), Payload: json.RawMessage(`{"otp":"1"}`)}
	}
	if _, err := c.q.Enqueue(context.Background(), jobs...); err != nil {
		t.Fatal(err)
	}
	return ids
}

// metricsText returns the replica's /metrics.
func metricsText(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// An idle replica's /readyz follows NATS: 503 while it is down, 200 soon
// after it is back, without a job to clear the queue's last error.
func TestReadyzRecoversIdle(t *testing.T) {
	c := newCluster(t, "nats", 100)
	p := c.start(1)[0]
	murl, ok := p.metricsURL(30 * time.Second)
	if !ok {
		t.Fatal("no metrics URL logged")
	}
	ready := strings.TrimSuffix(murl, "/metrics") + "/readyz"
	status := func() int {
		res, err := http.Get(ready)
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	eventually(t, 30*time.Second, "ready", func() bool { return status() == http.StatusOK })
	c.nats.Shutdown()
	eventually(t, 30*time.Second, "not ready with NATS down", func() bool { return status() == http.StatusServiceUnavailable })
	c.nats.Restart()
	eventually(t, 20*time.Second, "ready again after NATS is back, idle", func() bool { return status() == http.StatusOK })
}
