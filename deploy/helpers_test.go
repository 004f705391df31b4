package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/poll"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupBinaries()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// root is the repository root, seen from this package's directory.
const root = ".."

// inRoot returns the path of a repository file.
func inRoot(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }

// The services docker-compose.yml must define.
var (
	dispatchers    = []string{"dispatcher-1", "dispatcher-2", "dispatcher-3"}
	alwaysServices = append([]string{"redis", "nats", "mockprovider", "prometheus", "grafana"}, dispatchers...)
)

// configTarget is where the sluice services find their configuration.
const configTarget = "/etc/sluice/sluice.yaml"

// loadProject loads docker-compose.yml with compose-go, the Compose
// specification's reference loader, interpolating from env only (never
// this machine's environment) with the given profiles active.
func loadProject(t *testing.T, env []string, profiles ...string) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{inRoot("docker-compose.yml")},
		cli.WithWorkingDirectory(root),
		cli.WithEnv(env),
		cli.WithProfiles(profiles),
		cli.WithInterpolation(true),
		cli.WithNormalization(true),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatalf("compose options: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := opts.LoadProject(ctx)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return p
}

// service returns the named service of p, failing the test without it.
func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("docker-compose.yml: no service %q (have %v)", name, p.ServiceNames())
	}
	return s
}

// environ returns a service's environment as os.Environ gives it.
func environ(s types.ServiceConfig) []string {
	var env []string
	for k, v := range s.Environment {
		if v != nil {
			env = append(env, k+"="+*v)
		}
	}
	slices.Sort(env)
	return env
}

// mountSource returns the host path mounted at target in s.
func mountSource(t *testing.T, s types.ServiceConfig, target string) (string, types.ServiceVolumeConfig) {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Target == target {
			return v.Source, v
		}
	}
	t.Fatalf("service %s mounts nothing at %s", s.Name, target)
	return "", types.ServiceVolumeConfig{}
}

// flagValue returns the argument after flag in args, or "".
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// eventually polls cond every 20ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, 20*time.Millisecond, what, cond)
}
