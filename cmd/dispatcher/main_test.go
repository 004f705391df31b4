package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/pacer"
)

func runCmd(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag"}, "unknown flag"},
		{[]string{"set-rate"}, "give a RATE, or --clear alone"},
		{[]string{"set-rate", "fast", "--queue", "sms"}, "RATE must be a positive number"},
		{[]string{"set-rate", "10", "--clear"}, "give a RATE, or --clear alone"},
		{[]string{"dlq", "requeue"}, "give job ids, or --all alone"},
		{[]string{"dlq", "list", "--limit", "0", "--queue", "sms"}, "--limit: must be at least 1, got 0"},
		{[]string{"--log-format", "xml", "status", "--queue", "sms", "--rate", "1", "--sink-url", "http://127.0.0.1:1/"}, "--log-format"},
		{[]string{"--config", "/no/such/file.yaml"}, "/no/such/file.yaml"},
		{[]string{"--rate", "-3", "--queue", "sms"}, "pacer.rate"},
	} {
		code, _, stderr := runCmd(t, nil, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("dispatcher %v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}

// --port-file has nothing to write without a metrics listener: the
// combination is bad usage, refused before anything is dialed, not a file
// a supervisor waits for forever.
func TestPortFileNeedsListener(t *testing.T) {
	pf := filepath.Join(t.TempDir(), "port")
	// Bounded: a replica that starts instead runs until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"--queue", "sms", "--rate", "10", "--sink-url", "http://127.0.0.1:1/send",
		"--redis-url", "redis://127.0.0.1:1/0", "--metrics-listen", "off", "--port-file", pf}, &out, &errb)
	stderr := errb.String()
	if code != 2 || !strings.Contains(stderr, "--port-file") || !strings.Contains(stderr, "metrics.listen") {
		t.Errorf("--port-file with metrics.listen off: exit %d, stderr %q; want 2 naming --port-file and metrics.listen", code, stderr)
	}
	if _, err := os.Stat(pf); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("port file: stat %v, want none written", err)
	}
}

// config prints the effective configuration with secrets hidden.
func TestConfigCommand(t *testing.T) {
	code, out, stderr := runCmd(t, map[string]string{"SLUICE_REDIS_URL": "redis://user:s3cret@127.0.0.1:6379/0"},
		"config", "--config", "../../configs/sluice.yaml", "--rate", "250")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "rate: 250") || strings.Contains(out, "s3cret") {
		t.Errorf("config output should show rate 250 and hide the password:\n%s", out)
	}
}

// The admin commands work against a real Redis with no replica running.
func TestAdminOnRedis(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	env := map[string]string{"SLUICE_REDIS_URL": srv.URL(), "SLUICE_QUEUE_NAME": "admintest"}
	cfg := []string{"--config", "../../configs/sluice.yaml"}
	if code, out, stderr := runCmd(t, env, append([]string{"set-rate", "123"}, cfg...)...); code != 0 || !strings.Contains(out, "123/s") {
		t.Fatalf("set-rate: exit %d, %q %q", code, out, stderr)
	}
	code, out, stderr := runCmd(t, env, append([]string{"status"}, cfg...)...)
	if code != 0 || !strings.Contains(out, "effective 123/s") || !strings.Contains(out, "live replicas  0") {
		t.Errorf("status: exit %d, %s %s", code, out, stderr)
	}
	if code, out, _ := runCmd(t, env, append([]string{"pause"}, cfg...)...); code != 0 || !strings.Contains(out, "paused") {
		t.Errorf("pause: exit %d, %q", code, out)
	}
	if _, out, _ := runCmd(t, env, append([]string{"status"}, cfg...)...); !strings.Contains(out, "PAUSED") {
		t.Errorf("status after pause lacks PAUSED:\n%s", out)
	}
	if code, out, _ := runCmd(t, env, append([]string{"dlq", "list"}, cfg...)...); code != 0 || !strings.Contains(out, "REASON") {
		t.Errorf("dlq list: exit %d, %q", code, out)
	}
	if code, _, stderr := runCmd(t, env, append([]string{"dlq", "requeue", "nope"}, cfg...)...); code != 1 || !strings.Contains(stderr, "not found") {
		t.Errorf("dlq requeue of an unknown id: exit %d, %q; want 1, not found", code, stderr)
	}
}

// --demo reaches the demo in a default build (demo.go): a bad backend or
// count of jobs is bad usage, named by its flag, before anything starts.
func TestDemoFlags(t *testing.T) {
	for _, tc := range []struct{ args, want []string }{
		{[]string{"--demo", "--demo-backend", "kafka"}, []string{"--demo-backend: must be redis or nats"}},
		{[]string{"--demo", "--demo-jobs", "-1"}, []string{"--demo-jobs: must be between 1 and 1000000, got -1"}},
		{[]string{"--demo", "--rate", "5", "--config", "x.yaml"}, []string{"--config, --rate not used with it"}},
	} {
		code, _, stderr := runCmd(t, nil, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want[0]) {
			t.Errorf("dispatcher %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want[0])
		}
	}
}

// set-rate checks everything before it writes: bad input is a usage error
// (exit 2) that names the flag or argument and leaves the pacer's hash as
// it was; a rate and a burst are written together or not at all.
func TestSetRateChecksFirst(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	env := map[string]string{"SLUICE_REDIS_URL": srv.URL(), "SLUICE_QUEUE_NAME": "ratetest"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"250", "--burst", "5000000"}, "--burst must be between 1 and 1000000"},
		{[]string{"300", "--burst", "-3"}, "--burst must be between 1 and 1000000"},
		{[]string{"300", "--burst", "0"}, "--burst must be between 1 and 1000000"},
		{[]string{"--clear", "--burst", "5"}, "--burst"},
		{[]string{"--tenant", "acme", "50", "--burst", "5"}, "--burst cannot go with --tenant"},
		{[]string{"--tenant", "", "50"}, "--tenant"},
		{[]string{"NaN"}, "RATE must be a positive number"},
		{[]string{"Inf"}, "RATE must be a positive number"},
		{[]string{"1e12"}, "RATE must be a positive number"},
		{[]string{"0.0001"}, "RATE must be a positive number"},
		{[]string{"10", "20"}, "give a RATE"},
	} {
		code, _, stderr := runCmd(t, env, append([]string{"set-rate"}, tt.args...)...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("set-rate %q: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
	ctl, err := pacer.NewControls(srv.Client(), "ratetest")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := ctl.State(ctx)
	if err != nil {
		t.Fatalf("state: %v", err)
	}
	if st.RateOverride != 0 || st.BurstOverride != 0 {
		t.Errorf("after refused set-rates: rate override %g, burst override %d; want none written", st.RateOverride, st.BurstOverride)
	}
	if code, out, stderr := runCmd(t, env, "set-rate", "250", "--burst", "20"); code != 0 || !strings.Contains(out, "250/s burst 20") {
		t.Fatalf("set-rate 250 --burst 20: exit %d, %q %q", code, out, stderr)
	}
	if st, err = ctl.State(ctx); err != nil || st.RateOverride != 250 || st.BurstOverride != 20 {
		t.Errorf("after set-rate 250 --burst 20: rate override %g, burst override %d (%v); want 250 and 20", st.RateOverride, st.BurstOverride, err)
	}
}

// The operator's tenant overrides show in status, as text and JSON, so
// that what set-rate --tenant wrote can be seen and cleared.
func TestStatusShowsTenantOverrides(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	env := map[string]string{"SLUICE_REDIS_URL": srv.URL(), "SLUICE_QUEUE_NAME": "tenantstatus"}
	// No replica has run on this queue, and no pacer.rate is given here:
	// the rate is said to be unknown, not 0/s.
	if code, out, stderr := runCmd(t, env, "status"); code != 0 || strings.Contains(out, "tenant overrides") ||
		!strings.Contains(out, "not known yet: no replica has drawn on the schedule") {
		t.Errorf("status with no override: exit %d, stderr %q, want no tenant overrides and the rate not known yet:\n%s", code, stderr, out)
	}
	for _, args := range [][]string{{"--tenant", "acme", "5"}, {"--tenant", "Big_Corp", "7.5"}} {
		if code, out, stderr := runCmd(t, env, append([]string{"set-rate"}, args...)...); code != 0 {
			t.Fatalf("set-rate %v: exit %d, %q %q", args, code, out, stderr)
		}
	}
	code, out, stderr := runCmd(t, env, "status")
	if code != 0 || !strings.Contains(out, "Big_Corp 7.5/s, acme 5/s") {
		t.Errorf("status: exit %d, stderr %q, want a line with Big_Corp 7.5/s, acme 5/s:\n%s", code, stderr, out)
	}
	code, out, _ = runCmd(t, env, "status", "--json")
	var snap struct {
		Pacer struct {
			TenantOverrides map[string]float64 `json:"tenant_overrides"`
		} `json:"pacer"`
	}
	if err := json.Unmarshal([]byte(out), &snap); code != 0 || err != nil ||
		!maps.Equal(snap.Pacer.TenantOverrides, map[string]float64{"Big_Corp": 7.5, "acme": 5}) {
		t.Errorf("status --json: exit %d, %v, tenant_overrides %v; want Big_Corp 7.5 and acme 5", code, err, snap.Pacer.TenantOverrides)
	}
}
