package deploy_test

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/sluicehq/sluice/internal/config"
)

func TestComposeHasTheServicesAndTheProducerOnlyUnderItsProfile(t *testing.T) {
	p := loadProject(t, nil)
	got := p.ServiceNames()
	slices.Sort(got)
	want := slices.Sorted(slices.Values(alwaysServices))
	if !slices.Equal(got, want) {
		t.Errorf("services without a profile = %v, want %v", got, want)
	}
	if _, ok := p.DisabledServices["producer"]; !ok {
		t.Errorf("producer is not a service held back by a profile: disabled services %v", p.DisabledServices)
	}
	withLoad := loadProject(t, nil, "load")
	prod := service(t, withLoad, "producer")
	if !slices.Equal(prod.Profiles, []string{"load"}) {
		t.Errorf("producer profiles = %v, want [load]", prod.Profiles)
	}
	if prod.Restart != "no" {
		t.Errorf("producer restart = %q, want \"no\": one burst per run", prod.Restart)
	}
}

func TestComposePublishesEveryPortOnLoopbackOnly(t *testing.T) {
	p := loadProject(t, nil, "load")
	seen := map[string]string{}
	for _, s := range p.Services {
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %s on host address %q, want 127.0.0.1", s.Name, port.Published, port.HostIP)
			}
			if other, dup := seen[port.Published]; dup {
				t.Errorf("host port %s published by both %s and %s", port.Published, other, s.Name)
			}
			seen[port.Published] = s.Name
		}
	}
	for _, name := range []string{"redis", "nats", "mockprovider", "prometheus", "grafana"} {
		if len(service(t, p, name).Ports) == 0 {
			t.Errorf("%s publishes no port", name)
		}
	}
}

func TestComposeDispatchersAreThreeReplicasOnOneConfig(t *testing.T) {
	p := loadProject(t, nil)
	hostPorts := map[string]bool{}
	for _, name := range dispatchers {
		s := service(t, p, name)
		cfg := loadMountedConfig(t, s)
		host, port, err := net.SplitHostPort(cfg.Metrics.Listen)
		if err != nil || (host != "0.0.0.0" && host != "") {
			t.Errorf("%s: metrics.listen = %q, want every interface (0.0.0.0:port) so that Prometheus reaches it", name, cfg.Metrics.Listen)
		}
		if len(s.Ports) != 1 || strconv.Itoa(int(s.Ports[0].Target)) != port {
			t.Errorf("%s: ports %+v, want one, to the metrics port %s", name, s.Ports, port)
		} else {
			hostPorts[s.Ports[0].Published] = true
		}
		if s.Hostname != name {
			t.Errorf("%s: hostname %q, want %q (it names the replica in `dispatcher status`)", name, s.Hostname, name)
		}
		wantHC := []string{"CMD", "/usr/local/bin/healthcheck", "http://127.0.0.1:" + port + "/readyz"}
		if s.HealthCheck == nil || !slices.Equal(s.HealthCheck.Test, wantHC) {
			t.Errorf("%s: healthcheck %+v, want test %q", name, s.HealthCheck, wantHC)
		}
		if got := flagValue(s.Command, "--config"); got != configTarget {
			t.Errorf("%s: --config %q, want %s", name, got, configTarget)
		}
		if s.Entrypoint != nil {
			t.Errorf("%s: entrypoint %q, want the image's (the dispatcher)", name, s.Entrypoint)
		}
		for _, dep := range []string{"redis", "nats"} {
			if d, ok := s.DependsOn[dep]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s: depends_on %s = %+v, want condition service_healthy", name, dep, d)
			}
		}
	}
	if len(hostPorts) != len(dispatchers) {
		t.Errorf("dispatchers share host ports: %v", hostPorts)
	}
}

// loadMountedConfig loads the configuration file s mounts at configTarget
// with the environment Compose gives s, as the dispatcher's config.Load
// does at start-up: unknown keys, unknown SLUICE_ variables and impossible
// values fail the test.
func loadMountedConfig(t *testing.T, s types.ServiceConfig) *config.Config {
	t.Helper()
	src, v := mountSource(t, s, configTarget)
	if v.Type != types.VolumeTypeBind || !v.ReadOnly {
		t.Errorf("%s: %s mounted as %+v, want a read-only bind mount", s.Name, configTarget, v)
	}
	if rel, err := filepath.Rel(mustAbs(t, root), src); err != nil || !strings.HasPrefix(filepath.ToSlash(rel), "configs/") {
		t.Errorf("%s: mounts %s, want a file of configs/", s.Name, src)
	}
	cfg, err := config.Load(src, environ(s), nil)
	if err != nil {
		t.Fatalf("%s: the configuration it mounts fails the dispatcher's validation with its environment %q:\n%v", s.Name, environ(s), err)
	}
	return cfg
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func TestComposeConfigPassesValidationWithEitherBackend(t *testing.T) {
	for _, backend := range []string{"", "nats", "redis"} {
		t.Run("SLUICE_QUEUE_BACKEND="+backend, func(t *testing.T) {
			var env []string
			if backend != "" {
				env = []string{"SLUICE_QUEUE_BACKEND=" + backend}
			}
			p := loadProject(t, env, "load")
			want := config.Backend(backend)
			if backend == "" {
				want = config.BackendNATS
			}
			for _, name := range append(slices.Clone(dispatchers), "producer") {
				cfg := loadMountedConfig(t, service(t, p, name))
				if cfg.Queue.Backend != want {
					t.Errorf("%s: queue.backend = %s, want %s", name, cfg.Queue.Backend, want)
				}
			}
		})
	}
}

func TestComposeConfigPointsAtTheStacksServices(t *testing.T) {
	p := loadProject(t, nil)
	cfg := loadMountedConfig(t, service(t, p, "dispatcher-1"))
	checkURL := func(key, raw, svc string, port int) {
		t.Helper()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if u.Hostname() != svc || u.Port() != strconv.Itoa(port) {
			t.Errorf("%s = %s, want service %s on port %d", key, raw, svc, port)
		}
	}
	checkURL("redis.url", cfg.Redis.URL, "redis", 6379)
	checkURL("nats.url", cfg.NATS.URL, "nats", 4222)
	mock := service(t, p, "mockprovider")
	_, mockPort, err := net.SplitHostPort(flagValue(mock.Command, "--listen"))
	if err != nil {
		t.Fatalf("mockprovider --listen: %v", err)
	}
	n, _ := strconv.Atoi(mockPort)
	checkURL("sink.url", cfg.Sink.URL, "mockprovider", n)
	if got := flagValue(mock.Command, "--cap"); got != strconv.FormatFloat(cfg.Pacer.Rate, 'f', -1, 64) {
		t.Errorf("mockprovider --cap %s, want pacer.rate %g: its report would compare against another cap", got, cfg.Pacer.Rate)
	}
}

func TestComposeDependenciesWaitForHealthyServices(t *testing.T) {
	p := loadProject(t, nil, "load")
	for _, s := range p.Services {
		for dep, d := range s.DependsOn {
			target := service(t, p, dep)
			if d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s depends on %s with condition %q, want service_healthy", s.Name, dep, d.Condition)
			}
			if target.HealthCheck == nil || target.HealthCheck.Disable || len(target.HealthCheck.Test) == 0 {
				t.Errorf("%s waits for %s to be healthy, but %s has no health check", s.Name, dep, dep)
			}
		}
	}
	if hc := service(t, p, "producer").HealthCheck; hc == nil || !hc.Disable {
		t.Errorf("producer healthcheck %+v, want disabled (it serves nothing)", hc)
	}
}

func TestComposeServersKeepTheirDataOnVolumes(t *testing.T) {
	p := loadProject(t, nil)
	redis := service(t, p, "redis")
	if got := flagValue(redis.Command, "--appendonly"); got != "yes" {
		t.Errorf("redis --appendonly %q, want yes", got)
	}
	if got := flagValue(redis.Command, "--maxmemory-policy"); got != "noeviction" {
		t.Errorf("redis --maxmemory-policy %q, want noeviction", got)
	}
	nats := service(t, p, "nats")
	if !slices.Contains(nats.Command, "--jetstream") {
		t.Errorf("nats command %q, want --jetstream", nats.Command)
	}
	for _, c := range []struct{ svc, dir string }{
		{"redis", "/data"},
		{"nats", flagValue(nats.Command, "--store_dir")},
		{"prometheus", "/prometheus"},
		{"grafana", "/var/lib/grafana"},
	} {
		src, v := mountSource(t, service(t, p, c.svc), c.dir)
		if v.Type != types.VolumeTypeVolume {
			t.Errorf("%s keeps %s on %+v, want a named volume", c.svc, c.dir, v)
			continue
		}
		if _, ok := p.Volumes[src]; !ok {
			t.Errorf("%s: volume %q is not declared", c.svc, src)
		}
	}
}

func TestComposeBindMountsExist(t *testing.T) {
	p := loadProject(t, nil, "load")
	for _, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s mounts %s at %s: %v", s.Name, v.Source, v.Target, err)
			}
			if !v.ReadOnly {
				t.Errorf("%s mounts %s read-write, want read-only", s.Name, v.Source)
			}
		}
	}
}
