package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// maxPayload is queue.max_payload_bytes in the test configuration.
const maxPayload = 1024

// testConfig is a configuration with two lanes and one privileged user.
const testConfig = `
queue:
  name: sms
  backend: %s
  lanes: [{name: vip}, {name: default}]
  privileged_users: [alice]
  max_payload_bytes: 1024
pacer: {rate: 100}
sink: {url: "http://127.0.0.1:9/unused"}
`

// writeFile writes content into a new file of the test's directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// result is what one run of the command gave.
type result struct {
	code           int
	stdout, stderr string
}

// runCmd runs the command in-process with stdin.
func runCmd(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, strings.NewReader(stdin), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// redisEnv is a redis-server, the command's arguments for it and a queue
// on it to look at what the command stored.
type redisEnv struct {
	args []string
	q    *redisq.Queue
}

func newRedisEnv(t *testing.T) *redisEnv {
	t.Helper()
	srv := testredis.Start(t, testredis.Options{})
	q, err := redisq.New(srv.Client(), queue.Config{Name: "sms", Lanes: []string{"vip", "default"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	cfg := writeFile(t, "sluice.yaml", fmt.Sprintf(testConfig, "redis"))
	return &redisEnv{args: []string{"--config", cfg, "--redis-url", srv.URL()}, q: q}
}

// with returns the environment's arguments followed by more.
func (e *redisEnv) with(more ...string) []string {
	return append(append([]string{}, e.args...), more...)
}

// lanes returns the jobs each lane holds (ready, delayed or in flight).
func lanes(t *testing.T, q queue.Inspector) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, l := range st.Lanes {
		parts = append(parts, fmt.Sprintf("%s=%d", l.Lane, l.Ready+l.Delayed+l.InFlight))
	}
	return strings.Join(parts, " ")
}

// fetchOne fetches the one job of lane.
func fetchOne(t *testing.T, q queue.Consumer, lane string) *queue.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := q.Fetch(ctx, lane, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch %s: got %d jobs and %v, want one job", lane, len(ds), err)
	}
	return ds[0].Job()
}

var idRE = regexp.MustCompile(`^[0-9a-f-]{36}$`)

func TestOneJobFromFlags(t *testing.T) {
	e := newRedisEnv(t)
	payload := `{"to":"+15550100","text":"hi"}`

	r := runCmd(t, "", e.with("--user", "alice", "--key", "otp-1", "--cost", "2", "--payload", payload)...)
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !idRE.MatchString(id) {
		t.Fatalf("got exit %d, stdout %q, stderr %q; want exit 0 and a job id", r.code, r.stdout, r.stderr)
	}
	// The same key again: stored once, the first job's id.
	r = runCmd(t, "", e.with("--user", "alice", "--key", "otp-1", "--payload", payload)...)
	if r.code != 0 || r.stdout != id+" duplicate\n" {
		t.Errorf("again: got exit %d and %q, want exit 0 and %q", r.code, r.stdout, id+" duplicate\n")
	}
	if got, want := lanes(t, e.q), "vip=1 default=0"; got != want {
		t.Errorf("got lanes %s, want %s", got, want)
	}
	j := fetchOne(t, e.q, "vip")
	if j.ID != id || j.User != "alice" || j.Key != "otp-1" || j.Cost != 2 || string(j.Payload) != payload {
		t.Errorf("got job %+v, want the flags' job %s", j, id)
	}

	// An explicit lane wins over the user; --ttl sets expires_at from now.
	before := time.Now()
	r = runCmd(t, "", e.with("--user", "alice", "--lane", "default", "--ttl", "5m", "--id", "given-id", "--payload", payload)...)
	after := time.Now()
	if r.code != 0 || r.stdout != "given-id\n" {
		t.Fatalf("lane given: got exit %d, %q, %q; want exit 0 and the id given", r.code, r.stdout, r.stderr)
	}
	j = fetchOne(t, e.q, "default")
	if j.ExpiresAt.Before(before.Add(5*time.Minute).Truncate(time.Millisecond)) || j.ExpiresAt.After(after.Add(5*time.Minute)) {
		t.Errorf("got expires_at %s, want 5m after the run (%s to %s)", j.ExpiresAt, before, after)
	}

	// --not-before holds the job back: it waits as delayed.
	nb := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if r = runCmd(t, "", e.with("--user", "bob", "--not-before", nb, "--payload", payload)...); r.code != 0 {
		t.Fatalf("not-before: got exit %d, %q", r.code, r.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := e.q.Stats(ctx)
	if err != nil || st.Lanes[1].Delayed != 1 {
		t.Errorf("got stats %+v, %v; want one delayed job in default", st, err)
	}
}

// jobsFile has good and bad lines; the comments give the line numbers.
func jobsFile() string {
	lines := []string{
		`{"user": "alice", "payload": {"text": "one"}}`, // 1 good, vip
		`{"user": "bob", "payload": {"text": "two"`,     // 2 bad JSON
		``, // 3 blank, skipped
		`{"lane": "urgent", "payload": {"text": "three"}}`,       // 4 unknown lane
		`{"user": "bob", "payload": {"text": "four"}}`,           // 5 good, default
		`{"payload": "` + strings.Repeat("x", maxPayload) + `"}`, // 6 payload over the limit
		`{"user": "carol"}`,                                                // 7 no payload
		`{"not_before": "next week", "payload": 1}`,                        // 8 bad time
		`{"user": "alice", "lane": "default", "payload": {"n": 9}}`,        // 9 good, default
		`{"payload": "` + strings.Repeat("y", maxPayload+lineSlack) + `"}`, // 10 too long a line
		`{"payload": 11, "priority": "high"}`,                              // 11 unknown field
		`{"payload": 12}` + "\r",                                           // 12 good, CRLF
	}
	return strings.Join(lines, "\n") // no final newline
}

// badLines are what the report of jobsFile's bad lines must say.
var badLines = []string{
	"line 2: job: not valid JSON",
	`line 4: lane: unknown lane "urgent"`,
	"line 6: payload: 1026 bytes, more than the limit of 1024",
	"line 7: payload: required",
	`line 8: not_before: must be an RFC 3339 time (2026-11-21T10:00:00Z), got "next week"`,
	"line 10: job: longer than",
	"line 11: priority: unknown field",
}

func checkBadLines(t *testing.T, stderr string) {
	t.Helper()
	for _, want := range badLines {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q: want it to report %q", stderr, want)
		}
	}
	if strings.Contains(stderr, "line 3:") || strings.Contains(stderr, "line 12:") {
		t.Errorf("stderr %q: reports a good or blank line", stderr)
	}
}

func TestFileEnqueuesTheGoodLinesAndNamesTheBadOnes(t *testing.T) {
	e := newRedisEnv(t)
	path := writeFile(t, "jobs.jsonl", jobsFile())
	r := runCmd(t, "", e.with("--file", path, "--batch", "2")...)
	if r.code != 1 {
		t.Errorf("got exit %d, want 1 (some lines refused)", r.code)
	}
	checkBadLines(t, r.stderr)
	if want := "enqueued 4, duplicates 0, refused 7\n"; r.stdout != want {
		t.Errorf("got stdout %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "producer: 7 lines refused") {
		t.Errorf("got stderr %q, want the count of refused lines", r.stderr)
	}
	if got, want := lanes(t, e.q), "vip=1 default=3"; got != want {
		t.Errorf("got lanes %s, want %s", got, want)
	}
}

func TestStrictStoresNothingWhenALineIsBad(t *testing.T) {
	e := newRedisEnv(t)
	r := runCmd(t, "", e.with("--file", writeFile(t, "jobs.jsonl", jobsFile()), "--strict", "--batch", "2")...)
	if r.code != 1 || !strings.Contains(r.stderr, "--strict: nothing enqueued, 7 lines refused") {
		t.Errorf("got exit %d and stderr %q, want exit 1 saying nothing was enqueued", r.code, r.stderr)
	}
	checkBadLines(t, r.stderr)
	if want := "enqueued 0, duplicates 0, refused 7\n"; r.stdout != want {
		t.Errorf("got stdout %q, want %q", r.stdout, want)
	}
	if got, want := lanes(t, e.q), "vip=0 default=0"; got != want {
		t.Errorf("got lanes %s, want nothing stored (%s)", got, want)
	}
	// Every line good: all stored, in batches.
	var good strings.Builder
	for i := range 7 {
		fmt.Fprintf(&good, `{"user": "u%d", "payload": %d}`+"\n", i, i)
	}
	r = runCmd(t, "", e.with("--file", writeFile(t, "good.jsonl", good.String()), "--strict", "--batch", "3")...)
	if r.code != 0 || r.stdout != "enqueued 7, duplicates 0, refused 0\n" {
		t.Errorf("good file: got exit %d, %q, %q; want exit 0 and 7 enqueued", r.code, r.stdout, r.stderr)
	}
	if got, want := lanes(t, e.q), "vip=0 default=7"; got != want {
		t.Errorf("got lanes %s, want %s", got, want)
	}
}

func TestFileFromStdinCountsDuplicates(t *testing.T) {
	e := newRedisEnv(t)
	stdin := `{"user": "alice", "key": "k1", "payload": 1}
{"user": "bob", "key": "k2", "payload": 2}
{"user": "alice", "key": "k1", "payload": 1}
`
	r := runCmd(t, stdin, e.with("--file", "-")...)
	if r.code != 0 || r.stdout != "enqueued 2, duplicates 1, refused 0\n" {
		t.Errorf("got exit %d, stdout %q, stderr %q; want exit 0 and 2 enqueued, 1 duplicate", r.code, r.stdout, r.stderr)
	}
	if got, want := lanes(t, e.q), "vip=1 default=1"; got != want {
		t.Errorf("got lanes %s, want %s", got, want)
	}
	// An empty input enqueues nothing and is no failure.
	if r := runCmd(t, "", e.with("--file", "-")...); r.code != 0 || r.stdout != "enqueued 0, duplicates 0, refused 0\n" {
		t.Errorf("empty stdin: got exit %d and %q, want exit 0 and nothing enqueued", r.code, r.stdout)
	}
}

func TestProgressBarDoesNotChangeTheResult(t *testing.T) {
	e := newRedisEnv(t)
	path := writeFile(t, "jobs.jsonl", jobsFile())
	r := runCmd(t, "", e.with("--file", path, "--progress", "always")...)
	if r.code != 1 || r.stdout != "enqueued 4, duplicates 0, refused 7\n" {
		t.Errorf("got exit %d and %q, want exit 1 and 4 enqueued", r.code, r.stdout)
	}
	checkBadLines(t, r.stderr)
	if !strings.Contains(r.stderr, "enqueuing") {
		t.Errorf("got stderr %q, want a progress bar", r.stderr)
	}
	// auto, with stderr not a terminal: no bar.
	r = runCmd(t, "", e.with("--file", path)...)
	if strings.Contains(r.stderr, "enqueuing") {
		t.Errorf("got stderr %q, want no progress bar when stderr is not a terminal", r.stderr)
	}
}

var genRE = regexp.MustCompile(`^enqueued (\d+) in \S+: \d+ jobs/s \(vip (\d+), default (\d+)\)\n$`)

func TestGenFollowsTheMix(t *testing.T) {
	tests := []struct {
		args             []string
		total, vip, dflt string
	}{
		{[]string{"--gen", "20", "--mix", "vip=0.25"}, "20", "5", "15"},
		{[]string{"--gen", "10", "--mix", "privileged=0.3", "--batch", "3"}, "10", "3", "7"},
		{[]string{"--gen", "8", "--burst"}, "8", "0", "8"},
		{[]string{"--gen", "6", "--mix", "vip=0.5,privileged=0.5"}, "6", "6", "0"},
	}
	for _, tt := range tests {
		e := newRedisEnv(t)
		r := runCmd(t, "", e.with(tt.args...)...)
		m := genRE.FindStringSubmatch(r.stdout)
		if r.code != 0 || m == nil || m[1] != tt.total || m[2] != tt.vip || m[3] != tt.dflt {
			t.Errorf("%v: got exit %d, stdout %q, stderr %q; want %s enqueued, vip %s, default %s", tt.args, r.code, r.stdout, r.stderr, tt.total, tt.vip, tt.dflt)
		}
		if got, want := lanes(t, e.q), "vip="+tt.vip+" default="+tt.dflt; got != want {
			t.Errorf("%v: got lanes %s, want %s", tt.args, got, want)
		}
	}
}

func TestGenKeepsToTheRate(t *testing.T) {
	e := newRedisEnv(t)
	start := time.Now()
	r := runCmd(t, "", e.with("--gen", "11", "--rate", "100", "--batch", "4", "--progress", "always")...)
	elapsed := time.Since(start)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "enqueued 11 in ") {
		t.Fatalf("got exit %d, %q, %q; want 11 enqueued", r.code, r.stdout, r.stderr)
	}
	// The 11th job is due 100ms after the first: the run cannot be shorter.
	if elapsed < 100*time.Millisecond {
		t.Errorf("11 jobs at 100/s took %s, want at least 100ms", elapsed)
	}
	if !strings.Contains(r.stderr, "jobs") {
		t.Errorf("got stderr %q, want a progress bar counting jobs", r.stderr)
	}
	if got, want := lanes(t, e.q), "vip=0 default=11"; got != want {
		t.Errorf("got lanes %s, want %s", got, want)
	}
}

func TestBadFlagsExit2NamingTheFlag(t *testing.T) {
	cfg := writeFile(t, "sluice.yaml", fmt.Sprintf(testConfig, "redis"))
	// Nothing listens there: a bad flag must be found before any connection.
	base := []string{"--config", cfg, "--redis-url", "redis://127.0.0.1:1/0"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "bogus"},
		{nil, "[payload file gen]"},
		{[]string{"--payload", "1", "--gen", "3"}, "[payload file gen]"},
		{[]string{"--payload", "1", "--not-before", "tomorrow"}, "--not-before: must be an RFC 3339 time"},
		{[]string{"--payload", "1", "--ttl", "-1s"}, "--ttl: must be positive"},
		{[]string{"--payload", "1", "--ttl", "soon"}, "--ttl"},
		{[]string{"--payload", "1", "--lane", "urgent"}, `--lane: unknown lane "urgent"`},
		{[]string{"--payload", "1", "--cost", "-2"}, "--cost: must be between 1 and 100 (queue.max_cost), got -2"},
		{[]string{"--payload", "hello"}, "--payload: not valid JSON"},
		{[]string{"--payload", ""}, "--payload: required"},
		{[]string{"--payload", "1", "--key", strings.Repeat("k", 300)}, "--key: 300 bytes"},
		{[]string{"--payload", "1", "--batch", "5"}, "--batch: only with --file or --gen"},
		{[]string{"--file", "-", "--user", "alice"}, "--user: only with --payload"},
		{[]string{"--payload", "1", "--strict"}, "--strict: only with --file"},
		{[]string{"--payload", "1", "--rate", "5"}, "--rate: only with --gen"},
		{[]string{"--file", filepath.Join(t.TempDir(), "none.jsonl")}, "--file: open"},
		{[]string{"--file", "-", "--batch", "0"}, "--batch: must be between 1 and 10000"},
		{[]string{"--file", "-", "--progress", "sometimes"}, "--progress: must be auto, always or never"},
		{[]string{"--gen", "0"}, "--gen: must be at least 1"},
		{[]string{"--gen", "5", "--rate", "-1"}, "--rate: must be 0 or more"},
		{[]string{"--gen", "5", "--burst", "--rate", "10"}, "--burst"},
		{[]string{"--gen", "5", "--mix", "vip"}, `--mix: "vip": want NAME=SHARE`},
		{[]string{"--gen", "5", "--mix", "vip=1.5"}, "--mix"},
		{[]string{"--gen", "5", "--mix", "bulk=0.1"}, `--mix: "bulk" is neither a lane (vip, default) nor privileged`},
		{[]string{"--gen", "5", "--mix", "vip=0.6,privileged=0.6"}, "--mix: the shares add up to 1.2"},
		{[]string{"--payload", "1", "--log-level", "loud"}, "--log-level"},
		{[]string{"--payload", "1", "--backend", "kafka"}, "queue.backend: must be redis or nats"},
		{[]string{"--payload", "1", "--redis-url", "http://x"}, "redis.url"},
	}
	for _, tt := range tests {
		r := runCmd(t, "", append(append([]string{}, base...), tt.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: got exit %d and stderr %q, want exit 2 naming %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	// A missing configuration file is bad usage too.
	r := runCmd(t, "", "--config", filepath.Join(t.TempDir(), "none.yaml"), "--payload", "1")
	if r.code != 2 || !strings.Contains(r.stderr, "none.yaml") {
		t.Errorf("missing config: got exit %d and %q, want exit 2 naming the file", r.code, r.stderr)
	}
}

func TestHelpExits0(t *testing.T) {
	r := runCmd(t, "", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "--payload") || !strings.Contains(r.stdout, "--file") || !strings.Contains(r.stdout, "--gen") {
		t.Errorf("got exit %d and %q, want exit 0 and the flags", r.code, r.stdout)
	}
}

func TestBackendDownExits1(t *testing.T) {
	cfg := writeFile(t, "sluice.yaml", fmt.Sprintf(testConfig, "redis"))
	args := []string{"--config", cfg, "--redis-url", "redis://127.0.0.1:1/0?dial_timeout=1s&max_retries=1"}
	r := runCmd(t, "", append(args, "--payload", "1")...)
	if r.code != 1 || !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Errorf("one job: got exit %d and %q, want exit 1 with the backend's error", r.code, r.stderr)
	}
	r = runCmd(t, `{"payload": 1}`+"\n"+`{"payload": 2}`, append(args, "--file", "-")...)
	if r.code != 1 || r.stdout != "enqueued 0, duplicates 0, refused 0\n" || !strings.Contains(r.stderr, "lines 1 to 2: 0 of 2 jobs enqueued") {
		t.Errorf("file: got exit %d, %q, %q; want exit 1 naming the lines not enqueued", r.code, r.stdout, r.stderr)
	}
}

func TestConfigFileFromTheEnvironment(t *testing.T) {
	e := newRedisEnv(t)
	t.Setenv("SLUICE_CONFIG", e.args[1])
	t.Setenv("SLUICE_REDIS_URL", e.args[3])
	r := runCmd(t, "", "--user", "alice", "--payload", "1")
	if r.code != 0 || !idRE.MatchString(strings.TrimSpace(r.stdout)) {
		t.Fatalf("got exit %d, %q, %q; want the job enqueued with the configuration of $SLUICE_CONFIG", r.code, r.stdout, r.stderr)
	}
	if got, want := lanes(t, e.q), "vip=1 default=0"; got != want {
		t.Errorf("got lanes %s, want %s", got, want)
	}
}

// A byte order mark at the start of a file (as editors on Windows write
// one) is not part of the first job; one anywhere else is refused as the
// JSON it breaks.
func TestFileSkipsALeadingByteOrderMark(t *testing.T) {
	e := newRedisEnv(t)
	const bom = "\uFEFF"
	path := writeFile(t, "jobs.jsonl", bom+`{"payload":{"n":1}}`+"\r\n"+bom+`{"payload":{"n":2}}`+"\r\n")
	r := runCmd(t, "", e.with("--file", path)...)
	if r.code != 1 || r.stdout != "enqueued 1, duplicates 0, refused 1\n" || !strings.Contains(r.stderr, "line 2: job: not valid JSON") {
		t.Errorf("got exit %d, stdout %q, stderr %q; want line 1 enqueued and line 2 refused", r.code, r.stdout, r.stderr)
	}
}
