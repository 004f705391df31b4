package deploy_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/internal/testredis"
)

// composeEnv is a service's environment with the stack's host names
// replaced by this machine's test servers, and the configuration file at
// its path on the host (where the bind mount takes it from).
func composeEnv(t *testing.T, s types.ServiceConfig, overrides ...string) []string {
	t.Helper()
	src, _ := mountSource(t, s, configTarget)
	env := environ(s)
	for i, kv := range env {
		if strings.HasPrefix(kv, "SLUICE_CONFIG=") {
			env[i] = "SLUICE_CONFIG=" + src
		}
	}
	return append(env, overrides...)
}

// TestStackRunsWithTheComposeCommandLines runs what docker compose would
// run, without Docker: the mock provider, a dispatcher and the producer,
// built by the Dockerfile's build line, with the Compose file's arguments
// and environment, checked by the Compose file's health checks. Only the
// addresses differ: the stack's service names become this machine's test
// servers on free loopback ports.
func TestStackRunsWithTheComposeCommandLines(t *testing.T) {
	p := loadProject(t, nil, "load")
	rs := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, rs)
	ns := testnats.Start(t)

	mp, mockPort := startMockProvider(t, service(t, p, "mockprovider"))

	d := service(t, p, "dispatcher-1")
	cfg := loadMountedConfig(t, d)
	disp, metricsPort := startDispatcher(t, d, rs.URL(), ns.URL(), "http://127.0.0.1:"+mockPort)
	// The image's own HEALTHCHECK asks /healthz on the same port.
	if !healthy(t, []string{"CMD", "/usr/local/bin/healthcheck", "http://127.0.0.1:9464/healthz"}, metricsPort) {
		t.Error("dispatcher /healthz fails while /readyz passes")
	}

	prod := service(t, p, "producer")
	pp := start(t, binary(t, "producer"), prod.Command, composeEnv(t, prod,
		"SLUICE_REDIS_URL="+rs.URL(), "SLUICE_NATS_URL="+ns.URL()))
	select {
	case <-pp.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("producer still running after 2 minutes; stderr:\n%s", pp.stderr.String())
	}
	if pp.err != nil || !strings.Contains(pp.stdout.String(), "enqueued 6000 ") {
		t.Fatalf("producer with the Compose command %q: %v\nstdout: %s\nstderr: %s", prod.Command, pp.err, pp.stdout.String(), pp.stderr.String())
	}

	base := "http://127.0.0.1:" + metricsPort
	eventually(t, 30*time.Second, "the dispatcher delivers jobs to the mock provider", func() bool {
		fams := scrape(t, base)
		return sum(fams, "sluice_jobs_total", map[string]string{"outcome": "delivered"}) >= 20
	})
	if code := disp.stop(t, 20*time.Second); code != 0 {
		t.Errorf("dispatcher exit %d on SIGTERM, want 0; stderr:\n%s", code, disp.stderr.String())
	}
	if code := mp.stop(t, 10*time.Second); code != 0 {
		t.Errorf("mockprovider exit %d on SIGTERM, want 0; stderr:\n%s", code, mp.stderr.String())
	}
	// Its report compares the arrivals with --cap, which is pacer.rate.
	if want := fmt.Sprintf("cap %g/s", cfg.Pacer.Rate); !strings.Contains(mp.stdout.String(), want) {
		t.Errorf("mockprovider report lacks %q:\n%s", want, mp.stdout.String())
	}
}

// startDispatcher runs the dispatcher binary as Compose runs service d,
// with the stack's addresses replaced by redisURL, natsURL and the
// provider at providerBase (the path of sink.url is kept), and waits until
// d's health check passes. It returns the process and its metrics port.
func startDispatcher(t *testing.T, d types.ServiceConfig, redisURL, natsURL, providerBase string) (*proc, string) {
	t.Helper()
	cfg := loadMountedConfig(t, d)
	sinkURL, err := url.Parse(cfg.Sink.URL)
	if err != nil {
		t.Fatal(err)
	}
	base, err := url.Parse(providerBase)
	if err != nil {
		t.Fatal(err)
	}
	sinkURL.Scheme, sinkURL.Host = base.Scheme, base.Host
	metricsPort := freePort(t)
	src, _ := mountSource(t, d, configTarget)
	disp := start(t, binary(t, "dispatcher"), withFlag(t, d.Command, "--config", src), composeEnv(t, d,
		"SLUICE_REDIS_URL="+redisURL, "SLUICE_NATS_URL="+natsURL, "SLUICE_SINK_URL="+sinkURL.String(),
		"SLUICE_METRICS_LISTEN=127.0.0.1:"+metricsPort))
	eventually(t, 30*time.Second, "dispatcher ready (its Compose health check)", func() bool {
		if !disp.running() {
			t.Fatalf("dispatcher exited: %v\n%s", disp.err, disp.stderr.String())
		}
		return healthy(t, d.HealthCheck.Test, metricsPort)
	})
	return disp, metricsPort
}

// startMockProvider runs the mock provider with the arguments of service
// mock, listening on a free loopback port instead of 0.0.0.0:8080, and
// waits until mock's health check passes.
func startMockProvider(t *testing.T, mock types.ServiceConfig) (*proc, string) {
	t.Helper()
	port := freePort(t)
	mp := start(t, binary(t, "mockprovider"), withFlag(t, mock.Command, "--listen", "127.0.0.1:"+port), nil)
	eventually(t, 20*time.Second, "mockprovider healthy", func() bool {
		if !mp.running() {
			t.Fatalf("mockprovider exited: %v\n%s", mp.err, mp.stderr.String())
		}
		return healthy(t, mock.HealthCheck.Test, port)
	})
	return mp, port
}
