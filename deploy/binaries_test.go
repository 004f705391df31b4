package deploy_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The binaries are built once per test run, by the Dockerfile's own build
// line, into a directory removed by TestMain.
var built struct {
	once sync.Once
	dir  string
	out  string
	err  error
}

// builtBinaries runs the Dockerfile's `go build` line, as written, with
// its output directory moved to a temporary one, and returns that
// directory. It skips in -short mode: building four binaries takes a while
// on a cold build cache.
func builtBinaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binaries: skipped with -short")
	}
	b := dockerBuildLine(t)
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "sluice-deploy-bin-"); built.err != nil {
			return
		}
		shell := strings.Replace(b.shell, "-o "+b.outDir, "-o "+built.dir+"/", 1)
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", shell)
		cmd.Dir = root
		// As BuildKit sets them for the platform being built.
		cmd.Env = append(os.Environ(), "TARGETOS="+runtime.GOOS, "TARGETARCH="+runtime.GOARCH)
		out, err := cmd.CombinedOutput()
		built.out, built.err = string(out), err
	})
	if built.err != nil {
		t.Fatalf("the Dockerfile's build line (Dockerfile:%d) fails: %v\n%s", b.line, built.err, built.out)
	}
	return built.dir
}

// binary returns the path of one built binary.
func binary(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(builtBinaries(t), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the Dockerfile's build line did not produce %s: %v", name, err)
	}
	return p
}

func cleanupBinaries() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// dockerignore reads .dockerignore's patterns, cleaned as Docker cleans
// them. It fails on the forms this test's matcher does not implement.
func dockerignore(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(inRoot(".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pats []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		if strings.HasPrefix(p, "!") || strings.Contains(p, "**") {
			t.Fatalf(".dockerignore: %q: this test cannot check exceptions or '**'; extend ignored()", p)
		}
		pats = append(pats, path.Clean(strings.TrimPrefix(p, "/")))
	}
	return pats
}

// ignored reports whether Docker leaves rel (a slash path from the
// context's root) out of the build context: a pattern matches the path or
// one of its parent directories.
func ignored(pats []string, rel string) (string, bool) {
	parts := strings.Split(rel, "/")
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		for _, p := range pats {
			if ok, _ := path.Match(p, prefix); ok {
				return p, true
			}
		}
	}
	return "", false
}

func TestDockerignoreKeepsEverythingTheBuildNeeds(t *testing.T) {
	pats := dockerignore(t)
	// Every file of this module that go build ./cmd/... compiles or embeds.
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		"./cmd/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	abs := mustAbs(t, root)
	files := []string{"go.mod", "go.sum"}
	for _, f := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(abs, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	if len(files) < 10 {
		t.Fatalf("go list found only %v", files)
	}
	for _, f := range files {
		if p, ok := ignored(pats, f); ok {
			t.Errorf(".dockerignore pattern %q leaves out %s, which the build needs", p, f)
		}
	}
	for _, f := range []string{".git/HEAD", "dispatcher", "bin/dispatcher", "deploy/deploy_test.go", "x.test"} {
		if _, ok := ignored(pats, f); !ok {
			t.Errorf(".dockerignore lets %s into the build context", f)
		}
	}
}
