package deploy_test

import (
	"debug/elf"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// dockerfile is the Dockerfile as BuildKit reads it.
type dockerfile struct {
	metaArgs []instructions.ArgCommand
	stages   []instructions.Stage
	warnings []string // BuildKit's lint rules (docker build --check)
}

// parseDockerfile parses the Dockerfile with BuildKit's own parser and
// instruction decoder (what docker build runs), with its linter on.
func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	f, err := os.Open(inRoot("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile does not parse: %v", err)
	}
	var d dockerfile
	for _, w := range res.Warnings {
		d.warnings = append(d.warnings, w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		d.warnings = append(d.warnings, fmt.Sprintf("Dockerfile:%d: %s: %s", line, rule, msg))
	}})
	d.stages, d.metaArgs, err = instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	if len(d.stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a multi-stage build", len(d.stages))
	}
	return d
}

// commands returns a stage's commands of type T.
func commands[T instructions.Command](st instructions.Stage) []T {
	var out []T
	for _, c := range st.Commands {
		if v, ok := c.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// buildLine is the Dockerfile's `go build` command: the shell command of
// its RUN (BuildKit has taken RUN's own --mount flags off).
type buildLine struct {
	shell  string // as the RUN runs it, with sh -c
	outDir string // the -o directory
	line   int
}

// dockerBuildLine finds the one RUN that runs go build.
func dockerBuildLine(t *testing.T) buildLine {
	t.Helper()
	var found []buildLine
	for _, st := range parseDockerfile(t).stages {
		for _, run := range commands[*instructions.RunCommand](st) {
			shell := strings.Join(run.CmdLine, " ")
			if !strings.Contains(shell, "go build") {
				continue
			}
			if !run.PrependShell {
				t.Fatalf("Dockerfile: %q: want the shell form (it sets variables for go build)", shell)
			}
			found = append(found, buildLine{shell: shell, outDir: flagValue(strings.Fields(shell), "-o"), line: run.Location()[0].Start.Line})
		}
	}
	if len(found) != 1 {
		t.Fatalf("Dockerfile: %d RUN lines with go build, want 1: %+v", len(found), found)
	}
	return found[0]
}

func TestDockerfilePassesBuildKitsChecks(t *testing.T) {
	if w := parseDockerfile(t).warnings; len(w) > 0 {
		t.Errorf("BuildKit warns about the Dockerfile:\n%s", strings.Join(w, "\n"))
	}
}

func TestDockerfileBuildsStaticBinariesWithCIsFlags(t *testing.T) {
	b := dockerBuildLine(t)
	f := strings.Fields(b.shell)
	want := []string{"CGO_ENABLED=0", "-trimpath"}
	for _, name := range imageBinaries {
		want = append(want, "./cmd/"+name)
	}
	for _, w := range want {
		if !slices.Contains(f, w) {
			t.Errorf("Dockerfile:%d: %q lacks %s", b.line, b.shell, w)
		}
	}
	if tags := flagValue(f, "-tags"); tags != "production" {
		t.Errorf("Dockerfile:%d: -tags %q, want production (no demo in the image)", b.line, tags)
	}
	if !strings.HasSuffix(b.outDir, "/") {
		t.Errorf("Dockerfile:%d: -o %q, want a directory (ending in /) for several commands", b.line, b.outDir)
	}
	dir := builtBinaries(t)
	for _, name := range imageBinaries {
		path := filepath.Join(dir, name)
		ef, err := elf.Open(path)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		libs, _ := ef.ImportedLibraries()
		interp := slices.ContainsFunc(ef.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
		if interp || len(libs) > 0 {
			t.Errorf("%s is dynamically linked (interpreter %v, libraries %v): it would not run on a distroless static base", name, interp, libs)
		}
		ef.Close()
	}
}

// imageBinaries are the commands the image must ship.
var imageBinaries = []string{"dispatcher", "producer", "mockprovider", "healthcheck"}

func TestDockerfileFinalImageIsSmallNonRootAndHealthChecked(t *testing.T) {
	stages := parseDockerfile(t).stages
	final := stages[len(stages)-1]
	if final.BaseName != "scratch" && !strings.HasPrefix(final.BaseName, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s, want scratch or distroless/static (static binaries need no more)", final.BaseName)
	}
	users := commands[*instructions.UserCommand](final)
	if len(users) == 0 {
		t.Fatal("final stage has no USER: it would run as root")
	}
	user, _, _ := strings.Cut(users[len(users)-1].User, ":")
	if uid, err := strconv.Atoi(user); err != nil || uid == 0 {
		t.Errorf("USER %q, want a numeric non-zero uid (Kubernetes' runAsNonRoot can only check a number)", users[len(users)-1].User)
	}
	b := dockerBuildLine(t)
	copies := commands[*instructions.CopyCommand](final)
	if len(copies) != 1 || copies[0].From != stages[0].Name || !slices.Equal(copies[0].SourcePaths, []string{b.outDir}) || copies[0].DestPath != "/usr/local/bin/" {
		t.Errorf("final stage copies %+v, want COPY --from=%s %s /usr/local/bin/", copies, stages[0].Name, b.outDir)
	}
	entry := commands[*instructions.EntrypointCommand](final)
	if len(entry) != 1 || entry[0].PrependShell || !slices.Equal(entry[0].CmdLine, []string{"/usr/local/bin/dispatcher"}) {
		t.Errorf("ENTRYPOINT %+v, want [\"/usr/local/bin/dispatcher\"] (exec form: there is no shell)", entry)
	}
	hcs := commands[*instructions.HealthCheckCommand](final)
	if len(hcs) != 1 {
		t.Fatalf("final stage has %d HEALTHCHECK, want 1", len(hcs))
	}
	hc := hcs[0].Health
	if len(hc.Test) != 3 || hc.Test[0] != "CMD" || hc.Test[1] != "/usr/local/bin/healthcheck" {
		t.Fatalf("HEALTHCHECK %q, want CMD [\"/usr/local/bin/healthcheck\", URL] (exec form: no shell, no curl)", hc.Test)
	}
	if hc.Interval <= 0 || hc.Timeout <= 0 || hc.Timeout >= hc.Interval {
		t.Errorf("HEALTHCHECK interval %s, timeout %s: want both set, timeout under the interval", hc.Interval, hc.Timeout)
	}
	u, err := url.Parse(hc.Test[2])
	if err != nil {
		t.Fatal(err)
	}
	expose := commands[*instructions.ExposeCommand](final)
	if len(expose) != 1 || !slices.Equal(expose[0].Ports, []string{u.Port()}) || u.Hostname() != "127.0.0.1" {
		t.Errorf("HEALTHCHECK asks %s, EXPOSE %+v: want the exposed metrics port on 127.0.0.1", hc.Test[2], expose)
	}
}

func TestDockerfileGoVersionMeetsGoMod(t *testing.T) {
	d := parseDockerfile(t)
	goVersion := ""
	for _, a := range d.metaArgs {
		for _, kv := range a.Args {
			if kv.Key == "GO_VERSION" {
				goVersion = kv.ValueString()
			}
		}
	}
	if !strings.HasPrefix(d.stages[0].BaseName, "golang:${GO_VERSION}") || goVersion == "" {
		t.Fatalf("build stage FROM %s with ARG GO_VERSION=%q, want golang:${GO_VERSION} with a default", d.stages[0].BaseName, goVersion)
	}
	mod, err := os.ReadFile(inRoot("go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	img, err := majorMinor(goVersion)
	if err != nil {
		t.Fatalf("GO_VERSION %q: %v", goVersion, err)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	if img[0] < major || (img[0] == major && img[1] < minor) {
		t.Errorf("GO_VERSION %s is older than go.mod's go %d.%d", goVersion, major, minor)
	}
}

// majorMinor reads "major.minor".
func majorMinor(s string) ([2]int, error) {
	a, b, _ := strings.Cut(s, ".")
	major, err := strconv.Atoi(a)
	if err != nil {
		return [2]int{}, err
	}
	minor, err := strconv.Atoi(b)
	return [2]int{major, minor}, err
}

func TestComposeBuildsTheDockerfilesStagesAndRunsItsBinaries(t *testing.T) {
	var names []string
	for _, st := range parseDockerfile(t).stages {
		names = append(names, st.Name)
	}
	p := loadProject(t, nil, "load")
	for _, s := range p.Services {
		if s.Build == nil {
			continue
		}
		if s.Build.Dockerfile != "Dockerfile" || s.Build.Context != mustAbs(t, root) {
			t.Errorf("%s builds %s in %s, want the root Dockerfile", s.Name, s.Build.Dockerfile, s.Build.Context)
		}
		if !slices.Contains(names, s.Build.Target) {
			t.Errorf("%s builds target %q, not a stage of the Dockerfile (%v)", s.Name, s.Build.Target, names)
		}
		if len(s.Entrypoint) > 0 {
			bin, ok := strings.CutPrefix(s.Entrypoint[0], "/usr/local/bin/")
			if !ok || !slices.Contains(imageBinaries, bin) {
				t.Errorf("%s runs %q, not a binary the image ships (%v)", s.Name, s.Entrypoint[0], imageBinaries)
			}
		}
		if hc := s.HealthCheck; hc != nil && len(hc.Test) > 1 && hc.Test[0] == "CMD" && hc.Test[1] != "/usr/local/bin/healthcheck" {
			t.Errorf("%s health check runs %q: the image has no shell or curl, only /usr/local/bin/healthcheck", s.Name, hc.Test[1])
		}
	}
}
