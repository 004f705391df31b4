package deploy_test

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// promConfig is the part of prometheus.yml the tests read.
type promConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// mountedFile maps a path inside a service's container to the host file
// that a bind mount puts there.
func mountedFile(t *testing.T, s types.ServiceConfig, inContainer string) string {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		if inContainer == v.Target {
			return v.Source
		}
		if rel, ok := strings.CutPrefix(inContainer, v.Target+"/"); ok {
			return filepath.Join(v.Source, filepath.FromSlash(rel))
		}
	}
	t.Fatalf("%s: no bind mount holds %s", s.Name, inContainer)
	return ""
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func TestPrometheusScrapesEveryDispatcherAsTheDashboardsJob(t *testing.T) {
	p := loadProject(t, nil)
	prom := service(t, p, "prometheus")
	file := mountedFile(t, prom, flagValue(prom.Command, "--config.file"))
	var pc promConfig
	readYAML(t, file, &pc)

	var want []string
	for _, name := range dispatchers {
		cfg := loadMountedConfig(t, service(t, p, name))
		_, port, _ := net.SplitHostPort(cfg.Metrics.Listen)
		want = append(want, net.JoinHostPort(name, port))
	}
	jobs := map[string][]string{}
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			jobs[sc.JobName] = append(jobs[sc.JobName], st.Targets...)
		}
	}
	var sluiceJob string
	for job, targets := range jobs {
		if slices.Equal(slices.Sorted(slices.Values(targets)), want) {
			sluiceJob = job
		}
	}
	if sluiceJob == "" {
		t.Fatalf("prometheus.yml scrapes %v, want one job scraping exactly %v", jobs, want)
	}
	for where, qs := range dashboardQueries(t, loadDashboard(t)) {
		for _, q := range qs {
			for _, j := range q.jobs {
				if j != sluiceJob {
					t.Errorf("%s selects job=%q, but Prometheus scrapes the dispatchers as job %q", where, j, sluiceJob)
				}
			}
		}
	}
	for _, rf := range pc.RuleFiles {
		if _, err := os.Stat(mountedFile(t, prom, rf)); err != nil {
			t.Errorf("rule file %s: %v", rf, err)
		}
	}
	if len(pc.RuleFiles) == 0 {
		t.Error("prometheus.yml loads no rule file: the alerts would not run")
	}
}

func TestGrafanaIsProvisionedWithPrometheusAndTheDashboard(t *testing.T) {
	p := loadProject(t, nil)
	graf := service(t, p, "grafana")
	var ds struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, mountedFile(t, graf, "/etc/grafana/provisioning/datasources/prometheus.yaml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" {
		t.Fatalf("datasources %+v, want one of type prometheus", ds.Datasources)
	}
	u, err := url.Parse(ds.Datasources[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	prom := service(t, p, "prometheus")
	if u.Hostname() != "prometheus" || !slices.ContainsFunc(prom.Ports, func(pc types.ServicePortConfig) bool { return u.Port() == itoa(pc.Target) }) {
		t.Errorf("datasource url %s, want the prometheus service on its port %+v", u, prom.Ports)
	}

	var dp struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, mountedFile(t, graf, "/etc/grafana/provisioning/dashboards/sluice.yaml"), &dp)
	if len(dp.Providers) != 1 {
		t.Fatalf("dashboard providers %+v, want one", dp.Providers)
	}
	dir := mountedFile(t, graf, dp.Providers[0].Options.Path)
	if got, want := mustAbs(t, dir), mustAbs(t, inRoot(path.Dir(dashboardFile))); got != want {
		t.Errorf("Grafana loads dashboards from %s, want %s", got, want)
	}
	home := graf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	if home == nil {
		t.Fatal("no GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
	}
	if got, want := mustAbs(t, mountedFile(t, graf, *home)), mustAbs(t, inRoot(dashboardFile)); got != want {
		t.Errorf("home dashboard %s, want %s", got, want)
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// TestPrometheusFilesPassPromtool checks prometheus.yml and its rule files
// with Prometheus' own promtool, where it is installed (Debian's package
// prometheus has it). The container paths are moved to a copy on the host.
func TestPrometheusFilesPassPromtool(t *testing.T) {
	promtool := lookPath(t, "promtool")
	prom := service(t, loadProject(t, nil), "prometheus")
	configFile := flagValue(prom.Command, "--config.file")
	mountDir := path.Dir(configFile)
	hostDir := mountedFile(t, prom, mountDir)
	tmp := t.TempDir()
	entries, err := os.ReadDir(hostDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(hostDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		raw = []byte(strings.ReplaceAll(string(raw), mountDir+"/", tmp+"/"))
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(promtool, "check", "config", filepath.Join(tmp, path.Base(configFile))).CombinedOutput()
	if err != nil {
		t.Errorf("promtool check config: %v\n%s", err, out)
	}
}
