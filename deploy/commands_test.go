package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buffer is a bytes.Buffer safe for a process to write while a test reads.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// proc is a process a test started; it is killed at cleanup if still running.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr buffer
	done           chan struct{}
	err            error
}

// start runs bin with args and exactly env (a container inherits nothing
// from the host either).
func start(t *testing.T, bin string, args, env []string) *proc {
	t.Helper()
	p := &proc{name: bin, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// running reports whether the process has not exited.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, as docker stop does, and returns the exit code.
func (p *proc) stop(t *testing.T, grace time.Duration) int {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		t.Errorf("%s still running %s after SIGTERM; stderr:\n%s", p.name, grace, p.stderr.String())
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// freePort returns a loopback port free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// withFlag returns a copy of args with the value after flag set to value;
// the flag must be there.
func withFlag(t *testing.T, args []string, flag, value string) []string {
	t.Helper()
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == flag && i+1 < len(out) {
			out[i+1] = value
			return out
		}
	}
	t.Fatalf("%q has no %s", args, flag)
	return nil
}

// withPort returns raw (a URL) with its port replaced.
func withPort(t *testing.T, raw, port string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = net.JoinHostPort(u.Hostname(), port)
	return u.String()
}

// healthy runs the healthcheck binary as a container health check does
// and reports whether it passed.
func healthy(t *testing.T, test []string, port string) bool {
	t.Helper()
	if len(test) != 3 || test[0] != "CMD" {
		t.Fatalf("health check %q, want [CMD healthcheck URL]", test)
	}
	bin := binary(t, "healthcheck")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, bin, withPort(t, test[2], port)).Run() == nil
}

// lookPath skips the test when a server binary is not installed (CI
// installs both: .ci/run).
func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed: %v", name, err)
	}
	return p
}

func TestRedisServiceCommandRunsRedisWithAOFAndNoEviction(t *testing.T) {
	bin := lookPath(t, "redis-server")
	s := service(t, loadProject(t, nil), "redis")
	if s.Command[0] != "redis-server" {
		t.Fatalf("redis command %q, want redis-server ...", s.Command)
	}
	dir, port := t.TempDir(), freePort(t)
	// The service's own arguments, then this machine's port and directory
	// (later arguments win in Redis).
	args := append(append([]string(nil), s.Command[1:]...), "--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--daemonize", "no", "--logfile", dir+"/redis.log")
	p := start(t, bin, args, nil)
	cli := lookPath(t, "redis-cli")
	want := map[string]string{"appendonly": "yes", "appendfsync": "everysec", "maxmemory-policy": "noeviction", "maxmemory": "1073741824"}
	eventually(t, 10*time.Second, "redis-server answers", func() bool {
		if !p.running() {
			log, _ := os.ReadFile(dir + "/redis.log")
			t.Fatalf("redis-server exited with the service's arguments %q: %v\n%s", s.Command[1:], p.err, log)
		}
		return exec.Command(cli, "-p", port, "ping").Run() == nil
	})
	for key, v := range want {
		out, err := exec.Command(cli, "-p", port, "config", "get", key).Output()
		if got := strings.Fields(string(out)); err != nil || len(got) != 2 || got[1] != v {
			t.Errorf("CONFIG GET %s = %q (%v), want %s", key, got, err, v)
		}
	}
	// The service's health check, pointed at this port.
	hc := strings.Replace(s.HealthCheck.Test[1], "redis-cli", cli+" -p "+port, 1)
	if err := exec.Command("sh", "-c", hc).Run(); err != nil {
		t.Errorf("health check %q fails against a running Redis: %v", hc, err)
	}
	if code := p.stop(t, 10*time.Second); code != 0 {
		t.Errorf("redis-server exit %d on SIGTERM", code)
	}
}

func TestNATSServiceCommandRunsJetStreamOnDisk(t *testing.T) {
	bin := lookPath(t, "nats-server")
	s := service(t, loadProject(t, nil), "nats")
	if s.Command[0] != "nats-server" {
		t.Fatalf("nats command %q, want nats-server ...", s.Command)
	}
	dir, port, httpPort := t.TempDir(), freePort(t), freePort(t)
	args := withFlag(t, s.Command[1:], "--store_dir", dir)
	args = withFlag(t, args, "--http_port", httpPort)
	args = append(args, "--addr", "127.0.0.1", "--port", port)
	p := start(t, bin, args, nil)
	hc := s.HealthCheck.Test
	if len(hc) != 6 || hc[1] != "wget" {
		t.Fatalf("nats health check %q, want wget ... URL", hc)
	}
	healthURL := withPort(t, hc[5], httpPort)
	check := binary(t, "healthcheck")
	eventually(t, 15*time.Second, "nats-server healthy with JetStream at "+healthURL, func() bool {
		if !p.running() {
			t.Fatalf("nats-server exited with the service's arguments %q: %v\n%s", args, p.err, p.stderr.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return exec.CommandContext(ctx, check, healthURL).Run() == nil
	})
	if _, err := os.Stat(dir + "/jetstream"); err != nil {
		t.Errorf("JetStream keeps nothing in --store_dir: %v", err)
	}
	// Debian's nats-server 2.9 exits 1 on SIGTERM, newer ones 0: stopping
	// within the grace period is what counts.
	p.stop(t, 10*time.Second)
}
