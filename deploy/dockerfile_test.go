package deploy_test

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
	line int
}

// stage is one FROM ... AS name and its instructions.
type stage struct {
	base, name string
	ins        []instruction
}

// find returns the stage's instructions of one kind.
func (s stage) find(cmd string) []instruction {
	var out []instruction
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// parseDockerfile reads the Dockerfile's stages. It understands what the
// Dockerfile uses: comments, '\' continuations, FROM [--platform] IMAGE AS NAME.
func parseDockerfile(t *testing.T) (args []instruction, stages []stage) {
	t.Helper()
	f, err := os.Open(inRoot("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (text == "" || strings.HasPrefix(text, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, more := strings.CutSuffix(text, `\`); more {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(text)
		cmd, rest, _ := strings.Cut(cur.String(), " ")
		lines = append(lines, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(rest), line: start})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, in := range lines {
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			f = slices.DeleteFunc(f, func(s string) bool { return strings.HasPrefix(s, "--") })
			st := stage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
		case len(stages) == 0:
			args = append(args, in)
		default:
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a multi-stage build", len(stages))
	}
	return args, stages
}

// buildLine is the Dockerfile's `go build` command: the shell command of
// its RUN, without RUN's own --mount flags.
type buildLine struct {
	shell  string // as the RUN runs it
	outDir string // the -o directory
	line   int
}

// dockerBuildLine finds the one RUN of the build stage that runs go build.
func dockerBuildLine(t *testing.T) buildLine {
	t.Helper()
	_, stages := parseDockerfile(t)
	var found []buildLine
	for _, st := range stages {
		for _, in := range st.find("RUN") {
			if !strings.Contains(in.args, "go build") {
				continue
			}
			f := strings.Fields(in.args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			found = append(found, buildLine{shell: strings.Join(f, " "), outDir: flagValue(f, "-o"), line: in.line})
		}
	}
	if len(found) != 1 {
		t.Fatalf("Dockerfile: %d RUN lines with go build, want 1: %+v", len(found), found)
	}
	return found[0]
}

func TestDockerfileBuildsStaticBinariesWithCIsFlags(t *testing.T) {
	b := dockerBuildLine(t)
	f := strings.Fields(b.shell)
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/..."} {
		if !slices.Contains(f, want) {
			t.Errorf("Dockerfile:%d: %q lacks %s", b.line, b.shell, want)
		}
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
	_, stages := parseDockerfile(t)
	final := stages[len(stages)-1]
	if final.base != "scratch" && !strings.HasPrefix(final.base, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s, want scratch or distroless/static (static binaries need no more)", final.base)
	}
	users := final.find("USER")
	if len(users) == 0 {
		t.Fatal("final stage has no USER: it would run as root")
	}
	user, _, _ := strings.Cut(users[len(users)-1].args, ":")
	if uid, err := strconv.Atoi(user); err != nil || uid == 0 {
		t.Errorf("USER %q, want a numeric non-zero uid (Kubernetes' runAsNonRoot can only check a number)", users[len(users)-1].args)
	}
	b := dockerBuildLine(t)
	copies := final.find("COPY")
	if len(copies) != 1 || !slices.Equal(strings.Fields(copies[0].args), []string{"--from=build", b.outDir, "/usr/local/bin/"}) {
		t.Errorf("final stage COPY %+v, want --from=build %s /usr/local/bin/", copies, b.outDir)
	}
	entry := execForm(t, final.find("ENTRYPOINT"), "ENTRYPOINT")
	if !slices.Equal(entry, []string{"/usr/local/bin/dispatcher"}) {
		t.Errorf("ENTRYPOINT %q, want the dispatcher", entry)
	}
	hcs := final.find("HEALTHCHECK")
	if len(hcs) != 1 {
		t.Fatalf("final stage has %d HEALTHCHECK, want 1", len(hcs))
	}
	_, cmd, ok := strings.Cut(hcs[0].args, " CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %q has no CMD", hcs[0].args)
	}
	var hc []string
	if err := json.Unmarshal([]byte(cmd), &hc); err != nil || len(hc) != 2 || hc[0] != "/usr/local/bin/healthcheck" {
		t.Fatalf("HEALTHCHECK CMD %s, want [\"/usr/local/bin/healthcheck\", URL] in exec form (no shell in the image): %v", cmd, err)
	}
	u, err := url.Parse(hc[1])
	if err != nil {
		t.Fatal(err)
	}
	expose := final.find("EXPOSE")
	if len(expose) != 1 || expose[0].args != u.Port() || u.Hostname() != "127.0.0.1" {
		t.Errorf("HEALTHCHECK asks %s, EXPOSE %+v: want the exposed metrics port on 127.0.0.1", hc[1], expose)
	}
}

// execForm decodes the JSON exec form of the last of ins.
func execForm(t *testing.T, ins []instruction, what string) []string {
	t.Helper()
	if len(ins) == 0 {
		t.Fatalf("no %s", what)
	}
	var v []string
	if err := json.Unmarshal([]byte(ins[len(ins)-1].args), &v); err != nil {
		t.Fatalf("%s %s: want the JSON exec form: %v", what, ins[len(ins)-1].args, err)
	}
	return v
}

func TestDockerfileGoVersionMeetsGoMod(t *testing.T) {
	args, stages := parseDockerfile(t)
	goVersion := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a.args, "GO_VERSION="); a.cmd == "ARG" && ok {
			goVersion = v
		}
	}
	if !strings.Contains(stages[0].base, "golang:${GO_VERSION}") || goVersion == "" {
		t.Fatalf("build stage FROM %s with ARG GO_VERSION=%q, want golang:${GO_VERSION} with a default", stages[0].base, goVersion)
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
	_, stages := parseDockerfile(t)
	var names []string
	for _, st := range stages {
		names = append(names, st.name)
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
