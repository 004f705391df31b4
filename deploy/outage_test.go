package deploy_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/internal/testredis"
)

// countingProvider answers 200 to everything and counts the requests.
func countingProvider(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { n.Add(1) }))
	t.Cleanup(srv.Close)
	return srv, &n
}

// outageStack is a dispatcher run as Compose runs dispatcher-1, with a
// backlog from the Compose producer, on servers the test can stop.
type outageStack struct {
	rs       *testredis.Server
	ns       *testnats.Server
	disp     *proc
	port     string
	sent     *atomic.Int64
	hcTest   []string
	pacerCap float64
}

func startOutageStack(t *testing.T) *outageStack {
	t.Helper()
	p := loadProject(t, nil, "load")
	s := &outageStack{rs: testredis.Start(t, testredis.Options{AOF: true}), ns: testnats.Start(t)}
	testredis.RequireReal(t, s.rs)
	prov, sent := countingProvider(t)
	s.sent = sent
	d := service(t, p, "dispatcher-1")
	s.hcTest, s.pacerCap = d.HealthCheck.Test, loadMountedConfig(t, d).Pacer.Rate
	s.disp, s.port = startDispatcher(t, d, s.rs.URL(), s.ns.URL(), prov.URL)
	prod := service(t, p, "producer")
	pp := start(t, binary(t, "producer"), prod.Command, composeEnv(t, prod, "SLUICE_REDIS_URL="+s.rs.URL(), "SLUICE_NATS_URL="+s.ns.URL()))
	eventually(t, 2*time.Minute, "producer done", func() bool { return !pp.running() })
	if pp.err != nil {
		t.Fatalf("producer: %v\n%s", pp.err, pp.stderr.String())
	}
	s.waitSending(t, 50)
	return s
}

// waitSending waits until the provider got n more requests.
func (s *outageStack) waitSending(t *testing.T, n int64) {
	t.Helper()
	from := s.sent.Load()
	eventually(t, 30*time.Second, "the dispatcher sends", func() bool { return s.sent.Load() >= from+n })
}

// waitHealth waits until the Compose health check gives want.
func (s *outageStack) waitHealth(t *testing.T, want bool) {
	t.Helper()
	eventually(t, 30*time.Second, "health check passing = "+map[bool]string{true: "yes", false: "no"}[want], func() bool {
		if !s.disp.running() {
			t.Fatalf("dispatcher exited: %v\n%s", s.disp.err, s.disp.stderr.String())
		}
		return healthy(t, s.hcTest, s.port) == want
	})
}

// sentDuring returns the requests the provider got over d.
func (s *outageStack) sentDuring(d time.Duration) int64 {
	from := s.sent.Load()
	<-time.After(d)
	return s.sent.Load() - from
}

// backendErrors reads sluice_backend_errors_total of a component.
func (s *outageStack) backendErrors(t *testing.T, component string) float64 {
	t.Helper()
	return sum(scrape(t, "http://127.0.0.1:"+s.port), "sluice_backend_errors_total", map[string]string{"component": component})
}

func TestDispatcherSendsNothingWhileRedisIsDownAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack's binaries: skipped with -short")
	}
	s := startOutageStack(t)
	s.rs.Kill()
	s.waitHealth(t, false)
	// Slots granted before the kill (at most the pacer's horizon, 50 ms
	// of the rate) may still be spent; nothing after them.
	n := s.sentDuring(2 * time.Second)
	t.Logf("%d requests sent in the 2s after readiness failed with Redis down", n)
	if float64(n) > s.pacerCap*0.05+1 {
		t.Errorf("%d requests sent in 2s with Redis down, want at most the slots granted before (%g)", n, s.pacerCap*0.05+1)
	}
	if e := s.backendErrors(t, "pacer"); e == 0 {
		t.Error("sluice_backend_errors_total{component=\"pacer\"} = 0 with Redis down")
	}
	s.rs.Restart()
	s.waitHealth(t, true)
	s.waitSending(t, 50)
}

func TestDispatcherWaitsOutANATSRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack's binaries: skipped with -short")
	}
	s := startOutageStack(t)
	s.ns.Shutdown()
	s.waitHealth(t, false)
	// Jobs fetched before the stop may still go out (their acks fail, so
	// they come back after the visibility timeout: sent twice); then
	// nothing can be fetched.
	t.Logf("%d requests sent in the 2s after readiness failed with NATS down", s.sentDuring(2*time.Second))
	if e := s.backendErrors(t, "queue"); e == 0 {
		t.Error("sluice_backend_errors_total{component=\"queue\"} = 0 with NATS down")
	}
	s.ns.Restart()
	s.waitHealth(t, true)
	s.waitSending(t, 50)
}
