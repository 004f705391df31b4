package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
	"github.com/sluicehq/sluice/queue/redisq"
)

// bin holds the binaries built once for the package.
var bin string

func TestMain(m *testing.M) {
	if spec := os.Getenv(baselineWorkerEnv); spec != "" { // this process is the baseline's worker
		os.Exit(baselineWorkerMain(spec))
	}
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	// This process is the recording provider: it stamps each arrival when
	// its handler starts. A garbage collection here would hold arrivals
	// back and stamp them together, a bunch the dispatchers never sent;
	// collect less often (the arrivals are small).
	debug.SetGCPercent(400)
	// Built as the image builds it (-tags production: no demo linked in),
	// or SLUICE_E2E_DISPATCHER, a dispatcher built before (to compare two
	// builds with the same tests, as the README's performance section says).
	if err := dispatcherBinary(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// dispatcherBinary puts the dispatcher into dir: SLUICE_E2E_DISPATCHER's
// copy when set, else one built from this tree.
func dispatcherBinary(dir string) error {
	if src := os.Getenv("SLUICE_E2E_DISPATCHER"); src != "" {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "dispatcher"), b, 0o755)
	}
	cmd := exec.Command("go", "build", "-tags", "production", "-o", dir+string(os.PathSeparator), "github.com/sluicehq/sluice/cmd/dispatcher")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// cluster is a queue on a real backend, a provider and dispatcher processes.
type cluster struct {
	t       *testing.T
	backend string
	name    string
	redis   *testredis.Server
	nats    *testnats.Server
	prov    *mockprovider.Provider
	env     []string
	q       queue.Queue
	prio    priority.Config
	mu      sync.Mutex
	procs   []*proc
	stalls  *stallMeter // the test process's pauses, left out of checkExact's mean
}

// newCluster starts Redis (and NATS for that backend) and the provider.
// env adds SLUICE_* settings for the dispatchers.
func newCluster(t *testing.T, backend string, rate float64, env ...string) *cluster {
	t.Helper()
	return newClusterWith(t, backend, rate, testredis.Options{}, env...)
}

// newClusterWith is newCluster with Redis started as opts say (AOF, say,
// for a test that kills and restarts it).
func newClusterWith(t *testing.T, backend string, rate float64, opts testredis.Options, env ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, backend: backend, name: "e2e" + fmt.Sprint(time.Now().UnixNano()%1e6)}
	c.redis = testredis.Start(t, opts)
	topo := []string{"SLUICE_REDIS_URL=" + c.redis.URL()}
	if backend == "nats" {
		c.nats = testnats.Start(t)
		topo = append(topo, "SLUICE_NATS_URL="+c.nats.URL())
	}
	c.setUp(rate, append(topo, env...))
	c.q = c.openQueue("e2e-producer")
	return c
}

// setUp starts c's recording provider for rate (stopped with the test)
// and sets the dispatchers' environment: the cluster's queue, backend,
// provider and rate, then env (later settings win), then any
// SLUICE_E2E_SET_X=v of the test's own environment as SLUICE_X=v (a way
// to try settings in `make bench` without editing). It also sets the
// lanes and privileged users every cluster has.
func (c *cluster) setUp(rate float64, env []string) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	var err error
	if c.prov, err = mockprovider.New(mockprovider.Config{Listen: "127.0.0.1:0", Cap: rate}); err != nil {
		c.t.Fatal(err)
	}
	if err := c.prov.Start(ctx); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = c.prov.Close() })
	c.stalls = startStallMeter(c.t)
	c.env = []string{
		"SLUICE_QUEUE_NAME=" + c.name,
		"SLUICE_QUEUE_BACKEND=" + c.backend,
		"SLUICE_SINK_URL=" + c.prov.URL(),
		fmt.Sprintf("SLUICE_PACER_RATE=%g", rate),
		"SLUICE_METRICS_LISTEN=127.0.0.1:0",
	}
	c.env = append(c.env, env...)
	for _, kv := range os.Environ() {
		if rest, ok := strings.CutPrefix(kv, "SLUICE_E2E_SET_"); ok {
			c.env = append(c.env, "SLUICE_"+rest)
		}
	}
	c.prio = priority.Config{Lanes: []priority.Lane{{Name: "vip", Weight: 8}, {Name: "default", Weight: 2}},
		PrivilegedUsers: []string{"alice"}}
}

// openQueue opens the cluster's queue as the test's own consumer.
func (c *cluster) openQueue(consumer string) queue.Queue {
	cfg := queue.Config{Name: c.name, Lanes: []string{"vip", "default"}, Consumer: consumer}
	var q queue.Queue
	var err error
	if c.backend == "nats" {
		js, jerr := jetstream.New(c.nats.Conn())
		if jerr != nil {
			c.t.Fatal(jerr)
		}
		q, err = natsq.New(context.Background(), js, cfg)
	} else {
		q, err = redisq.New(c.redis.Client(), cfg)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = q.Close() })
	return q
}

// enqueue puts n jobs from user (routed as the dispatcher routes them)
// into the queue, ids prefix-0..n-1, and returns the ids.
func (c *cluster) enqueue(prefix, user string, n int) []string {
	c.t.Helper()
	return c.enqueueCost(prefix, user, n, 1)
}

// enqueueCost is enqueue with jobs that cost cost slots each.
func (c *cluster) enqueueCost(prefix, user string, n, cost int) []string {
	c.t.Helper()
	jobs := make([]*queue.Job, n)
	ids := make([]string, n)
	for i := range jobs {
		ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
		jobs[i] = &queue.Job{ID: ids[i], User: user, Cost: cost, Payload: json.RawMessage(fmt.Sprintf(`{"to":"+1555%07d","text":"hi"}`, i))}
		jobs[i].Lane = c.prio.Route(jobs[i])
	}
	for len(jobs) > 0 {
		k := min(500, len(jobs))
		if _, err := c.q.Enqueue(context.Background(), jobs[:k]...); err != nil {
			c.t.Fatal(err)
		}
		jobs = jobs[k:]
	}
	return ids
}

// start starts n dispatcher processes.
func (c *cluster) start(n int, args ...string) []*proc {
	c.t.Helper()
	return c.startWith(n, nil, args...)
}

// startWith starts n dispatcher processes with env added to the cluster's
// (later settings win).
func (c *cluster) startWith(n int, env []string, args ...string) []*proc {
	c.t.Helper()
	var out []*proc
	for range n {
		c.mu.Lock()
		i := len(c.procs)
		c.mu.Unlock()
		p := startProc(c.t, fmt.Sprintf("dispatcher-%d", i), append(slices.Clone(c.env), env...),
			append([]string{"--config", filepath.Join("..", "configs", "sluice.yaml")}, args...)...)
		c.mu.Lock()
		c.procs = append(c.procs, p)
		c.mu.Unlock()
		out = append(out, p)
	}
	return out
}

// allProcs returns the processes started so far.
func (c *cluster) allProcs() []*proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.procs)
}

// delivered returns how many distinct jobs the provider answered 2xx. It
// does not copy the arrivals, so polling it does not disturb the provider.
func (c *cluster) delivered() int {
	_, n := c.prov.Counts()
	return n
}

// waitDelivered waits until n distinct jobs were delivered.
func (c *cluster) waitDelivered(n int, within time.Duration) {
	c.t.Helper()
	eventually(c.t, within, fmt.Sprintf("%d jobs delivered", n), func() bool { return c.delivered() >= n })
}

// proc is one dispatcher process.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	log    string
	done   chan struct{}
	exit   int
	metric chan string // the metrics URL, once logged

	murlMu sync.Mutex
	murl   string // the metrics URL, once taken from metric
}

// metricsURL returns the process's /metrics URL, waiting up to within for
// it to be logged; ok is false when it was not.
func (p *proc) metricsURL(within time.Duration) (string, bool) {
	p.murlMu.Lock()
	defer p.murlMu.Unlock()
	if p.murl != "" {
		return p.murl, true
	}
	select {
	case p.murl = <-p.metric:
		return p.murl, true
	case <-time.After(within):
		return "", false
	}
}

var metricsURL = regexp.MustCompile(`msg="sluice: metrics" url=(\S+)`)

func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{}), metric: make(chan string, 1)}
	p.cmd = exec.Command(filepath.Join(bin, "dispatcher"), args...)
	p.cmd.Env = append(cleanEnv(), env...)
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = f, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	go func() { // copy the log, noting the metrics URL
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(f, line)
			if m := metricsURL.FindStringSubmatch(line); m != nil {
				select {
				case p.metric <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		err := p.cmd.Wait()
		p.exit = p.cmd.ProcessState.ExitCode()
		_ = err
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() || os.Getenv("SLUICE_E2E_LOGS") != "" {
			b, _ := os.ReadFile(p.log)
			t.Logf("%s log (exit %d):\n%s", p.name, p.exit, tail(string(b), 40))
		}
	})
	return p
}

func (p *proc) signal(s syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(s)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(within time.Duration) (int, bool) {
	select {
	case <-p.done:
		return p.exit, true
	case <-time.After(within):
		return 0, false
	}
}

// cleanEnv is this process's environment without SLUICE_ settings.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			out = append(out, kv)
		}
	}
	return out
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// eventually polls cond every 50ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, 50*time.Millisecond, what, cond)
}
