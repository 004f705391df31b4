package deploy_test

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// demoOnly are the packages only the demo and the mock provider need: an
// embedded Redis with its Lua VM, an embedded NATS server, the plotting
// stack and the demo itself. A production dispatcher or producer links
// none of them.
var demoOnly = []string{
	"github.com/alicebob/miniredis/v2",
	"github.com/yuin/gopher-lua",
	"github.com/nats-io/nats-server/v2",
	"gonum.org/v1/plot",
	"github.com/sluicehq/sluice/internal/demo",
	"github.com/sluicehq/sluice/internal/mockprovider",
}

// productionCommands are the binaries that run in production.
var productionCommands = []string{"./cmd/dispatcher", "./cmd/producer", "./cmd/healthcheck"}

// goListDeps returns the import paths pkg (and pkg itself) depends on when
// built with tags, as go list -deps prints them.
func goListDeps(t *testing.T, tags, pkg string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-tags", tags, pkg)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -tags %q %s: %v", tags, pkg, err)
	}
	return strings.Fields(string(out))
}

// demoDeps returns the packages of deps that only the demo needs.
func demoDeps(deps []string) []string {
	var found []string
	for _, d := range deps {
		for _, banned := range demoOnly {
			if d == banned || strings.HasPrefix(d, banned+"/") {
				found = append(found, d)
			}
		}
	}
	return found
}

// The Dockerfile builds with -tags production, and with it the production
// commands link nothing of the demo; without it the dispatcher does (so
// this test sees the packages it looks for).
func TestProductionBinariesLinkNoDemo(t *testing.T) {
	b := dockerBuildLine(t)
	tags := flagValue(strings.Fields(b.shell), "-tags")
	if !slices.Contains(strings.Split(tags, ","), "production") {
		t.Fatalf("Dockerfile:%d: %q builds without -tags production: the image would ship the demo", b.line, b.shell)
	}
	for _, pkg := range productionCommands {
		if found := demoDeps(goListDeps(t, tags, pkg)); len(found) > 0 {
			t.Errorf("go list -deps -tags %s %s: links %s, which only the demo needs", tags, pkg, strings.Join(found, ", "))
		}
	}
	if found := demoDeps(goListDeps(t, "", "./cmd/dispatcher")); !slices.Contains(found, "github.com/sluicehq/sluice/internal/demo") {
		t.Errorf("go list -deps ./cmd/dispatcher (no tags): found %v, want the demo (go run ./cmd/dispatcher --demo)", found)
	}
}

// make build builds what the image ships, the same way (make -n prints
// the recipe as make expands it, without running it).
func TestMakeBuildUsesTheProductionTag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-n", "build")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n build: %v", err)
	}
	recipe := strings.TrimSpace(string(out))
	if f := strings.Fields(recipe); flagValue(f, "-tags") != "production" || !slices.Contains(f, "-trimpath") || !slices.Contains(f, "CGO_ENABLED=0") {
		t.Errorf("make build runs %q, want CGO_ENABLED=0 go build -trimpath -tags production", recipe)
	}
}

// A production dispatcher asked for the demo says where it went.
func TestProductionDispatcherRefusesDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary(t, "dispatcher"), "--demo").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "go run ./cmd/dispatcher --demo") {
		t.Errorf("dispatcher --demo (production build): %v, output %q; want exit 2 naming go run ./cmd/dispatcher --demo", err, out)
	}
}
