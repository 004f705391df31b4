package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// apiToken is the ingest API's token in these tests.
const apiToken = "e2e-token-0123456789abcdef"

var ingestURL = regexp.MustCompile(`msg="sluice: ingest api" url=(\S+)`)

// startAPI starts `dispatcher serve-api` for the cluster's queue on a free
// loopback port, with a 64 KiB body limit, and returns its queue URL
// (http://127.0.0.1:port/v1/queues/<name>).
func startAPI(t *testing.T, c *cluster) string {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "api-token")
	if err := os.WriteFile(tokenFile, []byte(apiToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(append([]string{}, c.env...), "SLUICE_API_LISTEN=127.0.0.1:0",
		"SLUICE_API_TOKEN_FILE="+tokenFile, "SLUICE_API_MAX_BODY_BYTES=65536")
	p := startProc(t, "serve-api", env, "serve-api")
	var url string
	eventually(t, 20*time.Second, "serve-api logs its URL", func() bool {
		b, _ := os.ReadFile(p.log)
		if m := ingestURL.FindSubmatch(b); m != nil {
			url = string(m[1])
			return true
		}
		select {
		case <-p.done:
			t.Fatalf("serve-api exited with %d:\n%s", p.exit, b)
		default:
		}
		return false
	})
	return url
}

// step is one request of a client and its answer.
type step struct {
	Status int            `json:"status"`
	Body   map[string]any `json:"body"`
}

// fieldsOf lists the fields an error answer names.
func (s step) fieldsOf() []string {
	e, _ := s.Body["error"].(map[string]any)
	fs, _ := e["fields"].([]any)
	var out []string
	for _, f := range fs {
		m, _ := f.(map[string]any)
		out = append(out, fmt.Sprint(m["field"]))
	}
	return out
}

// stored sums the jobs a status answer counts.
func (s step) stored() int {
	n, _ := s.Body["dead_letters"].(float64)
	lanes, _ := s.Body["lanes"].([]any)
	for _, l := range lanes {
		m, _ := l.(map[string]any)
		for _, k := range []string{"ready", "delayed", "in_flight"} {
			v, _ := m[k].(float64)
			n += v
		}
	}
	return int(n)
}

// judge checks the steps a client (curl or Node) made, the same script for both.
func judge(t *testing.T, who string, s map[string]step) {
	t.Helper()
	check := func(name string, ok bool, want string) {
		t.Helper()
		if !ok {
			t.Errorf("%s %s: got %d %v, want %s", who, name, s[name].Status, s[name].Body, want)
		}
	}
	check("one", s["one"].Status == 201 && s["one"].Body["id"] != "" && s["one"].Body["duplicate"] == false, "201 with an id")
	jobs, _ := s["batch"].Body["jobs"].([]any)
	dupOf := func(i int) any { m, _ := jobs[i].(map[string]any); return m["duplicate"] }
	check("batch", s["batch"].Status == 201 && len(jobs) == 3 && dupOf(0) == false && dupOf(1) == true && dupOf(2) == false,
		"201 with the second job a duplicate")
	check("located", s["located"].Status == 200 && s["located"].Body["state"] == "waiting", "200 waiting")
	check("cancelled", s["cancelled"].Status == 200 && s["cancelled"].Body["was"] == "waiting", "200, was waiting")
	check("gone", s["gone"].Status == 404 && s["gone"].Body["state"] == "unknown", "404 unknown")
	check("status", s["status"].Status == 200 && s["status"].stored() > 0, "200 with the jobs counted")
	check("wrongToken", s["wrongToken"].Status == 401 && strings.Contains(fmt.Sprint(s["wrongToken"].fieldsOf()), "Authorization"), "401 naming Authorization")
	check("oversize", s["oversize"].Status == 413 && strings.Contains(fmt.Sprint(s["oversize"].fieldsOf()), "body"), "413 naming body")
	check("malformed", s["malformed"].Status == 400 && strings.Contains(fmt.Sprint(s["malformed"].fieldsOf()), "body"), "400 naming body")
	f := fmt.Sprint(s["refused"].fieldsOf())
	check("refused", s["refused"].Status == 400 && strings.Contains(f, "jobs[1].cost") && strings.Contains(f, "jobs[2].request.url"),
		"400 naming jobs[1].cost and jobs[2].request.url")
	check("statusAfter", s["statusAfter"].stored() == s["status"].stored(), fmt.Sprintf("%d jobs stored, as before the refused batch", s["status"].stored()))
}

// curlSteps makes the judged steps with curl.
func curlSteps(t *testing.T, api, tag string) (map[string]step, string) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	call := func(method, path, body string, token ...string) step {
		tok := apiToken
		if len(token) > 0 {
			tok = token[0]
		}
		args := []string{"-sS", "-X", method, "-H", "Authorization: Bearer " + tok, "-w", "\n%{http_code}"}
		if body != "" {
			args = append(args, "-H", "Content-Type: application/json", "--data-binary", "@-")
		}
		args = append(args, api+path)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "curl", args...)
		cmd.Stdin = strings.NewReader(body)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("curl %s %s: %v", method, path, err)
		}
		i := bytes.LastIndexByte(out, '\n')
		st := step{}
		st.Status, _ = strconv.Atoi(string(out[i+1:]))
		if err := json.Unmarshal(out[:i], &st.Body); err != nil {
			t.Errorf("curl %s %s: answer %d is not JSON: %s", method, path, st.Status, out[:i])
		}
		return st
	}
	s := map[string]step{}
	s["one"] = call("POST", "/jobs", `{"user":"alice","key":"`+tag+`-otp-1","request":{"path":"/v2/sms","headers":{"X-Tenant":"acme"}},"payload":{"to":"+15550100","text":"your code is 123456"}}`)
	s["batch"] = call("POST", "/jobs", `{"jobs":[{"key":"`+tag+`-b-1","payload":{"to":"+15550101"}},{"key":"`+tag+`-otp-1","payload":{"to":"+15550100"}},{"key":"`+tag+`-b-3","payload":{"to":"+15550103"}}]}`)
	jobs, _ := s["batch"].Body["jobs"].([]any)
	cancelID := "missing"
	if len(jobs) == 3 {
		cancelID = fmt.Sprint(jobs[2].(map[string]any)["id"])
	}
	s["located"] = call("GET", "/jobs/"+cancelID, "")
	s["cancelled"] = call("DELETE", "/jobs/"+cancelID, "")
	s["gone"] = call("GET", "/jobs/"+cancelID, "")
	s["status"] = call("GET", "", "")
	s["wrongToken"] = call("POST", "/jobs", `{"payload":1}`, "not-the-token-0123456789")
	s["oversize"] = call("POST", "/jobs", `{"payload":"`+strings.Repeat("x", 80000)+`"}`)
	s["malformed"] = call("POST", "/jobs", `{"payload": {"to": }`)
	s["refused"] = call("POST", "/jobs", `{"jobs":[{"payload":{"to":"+15550104"}},{"cost":5000,"payload":{"to":"+15550105"}},{"request":{"url":"https://evil.example/steal"},"payload":{"to":"+15550106"}}]}`)
	s["statusAfter"] = call("GET", "", "")
	return s, cancelID
}

// nodeSteps runs e2e/testdata/ingest.mjs, the same steps with fetch.
func nodeSteps(t *testing.T, api, tag string) (map[string]step, string) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed (apt-get install nodejs; version 18 or later, for fetch)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "testdata/ingest.mjs")
	cmd.Env = append(cleanEnv(), "SLUICE_API="+api, "SLUICE_TOKEN="+apiToken, "SLUICE_TAG="+tag)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node testdata/ingest.mjs: %v\n%s", err, stderr.String())
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("node output is not JSON: %v\n%s", err, out)
	}
	s := map[string]step{}
	var cancelID string
	for k, v := range raw {
		if k == "cancelID" {
			_ = json.Unmarshal(v, &cancelID)
			continue
		}
		var st step
		if err := json.Unmarshal(v, &st); err != nil {
			t.Fatalf("node step %s: %v", k, err)
		}
		s[k] = st
	}
	return s, cancelID
}

// apiGet GETs url from the ingest API with the token.
func apiGet(t *testing.T, url string) step {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := step{Status: resp.StatusCode}
	if err := json.NewDecoder(resp.Body).Decode(&s.Body); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return s
}

// TestAPIIngest drives `dispatcher serve-api` with curl and with a Node
// script on each backend, then starts a dispatcher: the jobs enqueued over
// HTTP reach the provider, the one with its own path on that path, and the
// cancelled ones never; a job stored past the checks (straight into the
// queue) that names another host is dead-lettered at send, request.url named.
func TestAPIIngest(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) {
			c := newCluster(t, backend, 200)
			api := startAPI(t, c)
			var cancelled []string
			t.Run("curl", func(t *testing.T) {
				s, id := curlSteps(t, api, "curl")
				judge(t, "curl", s)
				cancelled = append(cancelled, id)
			})
			t.Run("node", func(t *testing.T) {
				s, id := nodeSteps(t, api, "node")
				judge(t, "node", s)
				cancelled = append(cancelled, id)
			})
			sent := 2 * len(cancelled) // each client: one job, then a batch of three with one duplicate and one cancelled
			// A job stored past the API's checks (straight into the queue)
			// that names another host is dead-lettered at send, never sent.
			if _, err := c.q.Enqueue(t.Context(), &queue.Job{ID: "evil-1", Payload: json.RawMessage(`{"to":"+1555"}`),
				Request: &queue.Request{URL: "http://evil.example/steal"}}); err != nil {
				t.Fatal(err)
			}
			c.start(1)
			c.waitDelivered(sent, 30*time.Second)
			var dead step
			eventually(t, 20*time.Second, "the out-of-bounds job is dead-lettered", func() bool {
				dead = apiGet(t, api+"/jobs/evil-1")
				return dead.Body["state"] == "dead"
			})
			if r := fmt.Sprint(dead.Body["reason"]); !strings.Contains(r, "request.url: host evil.example") {
				t.Errorf("dead letter of the out-of-bounds job: got reason %q, want request.url named", r)
			}
			own := 0
			for _, a := range c.prov.Arrivals() {
				for _, id := range cancelled {
					if a.JobID == id {
						t.Errorf("cancelled job %s reached the provider", id)
					}
				}
				if a.URI == "/send/v2/sms" {
					own++
				}
			}
			if want := len(cancelled); own != want {
				t.Errorf("jobs arrived on their own path /send/v2/sms: got %d, want %d", own, want)
			}
		})
	}
}
