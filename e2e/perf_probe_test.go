package e2e_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
)

// What the perf table measures of the processes around a run, read from
// /proc, Redis and the NATS server itself, never from timings the
// dispatchers report about themselves.

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (100 on every Linux the project runs on).
const clockTicks = 100

// cpuOf returns the CPU time (user + system) pid used so far.
func cpuOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("perf: cpu of %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields count from the
	// closing parenthesis. utime and stime are fields 14 and 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("perf: cpu of %d: short stat %q", pid, s)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("perf: cpu of %d: stat %q", pid, s)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// hwmOf returns pid's peak resident set size (VmHWM) in bytes.
func hwmOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("perf: status of %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("perf: VmHWM of %d: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("perf: no VmHWM for %d", pid)
}

// redisSection returns the fields of one INFO section.
func redisSection(ctx context.Context, rdb *redis.Client, section string) (map[string]string, error) {
	s, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("perf: INFO %s: %w", section, err)
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// redisPID is the redis-server's process id.
func redisPID(ctx context.Context, rdb *redis.Client) (int, error) {
	m, err := redisSection(ctx, rdb, "server")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(m["process_id"])
}

// redisReads is the read events Redis processed so far
// (total_reads_processed): each is one batch of commands read off a
// connection, so a pipeline counts once. The table's round trips.
func redisReads(ctx context.Context, rdb *redis.Client) (int64, error) {
	m, err := redisSection(ctx, rdb, "stats")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(m["total_reads_processed"], 10, 64)
}

// commandCounts counts the commands clients send to one Redis (MONITOR),
// the pacer's script calls apart. Commands run inside scripts are not
// counted.
type commandCounts struct {
	total, pacer atomic.Int64
	stop         func()
}

// monitorLine is a client's command in MONITOR output: the client's
// address (or "lua"), the command and its first argument.
var monitorLine = regexp.MustCompile(`^\+[0-9.]+ \[\d+ ([^\]]+)\] "([^"]*)"(?: "([^"]*)")?`)

// monitor starts counting addr's commands until stop is called.
func monitor(t *testing.T, addr string) *commandCounts {
	t.Helper()
	shas := scriptSHAs(t, "pacer")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("perf: monitor: %v", err)
	}
	if _, err := io.WriteString(conn, "MONITOR\r\n"); err != nil {
		t.Fatalf("perf: monitor: %v", err)
	}
	c := &commandCounts{}
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			m := monitorLine.FindStringSubmatch(sc.Text())
			if m == nil || m[1] == "lua" {
				continue
			}
			c.total.Add(1)
			if cmd := strings.ToLower(m[2]); (cmd == "evalsha" || cmd == "evalsha_ro") && shas[m[3]] != "" {
				c.pacer.Add(1)
			}
		}
	})
	var once sync.Once
	c.stop = func() { once.Do(func() { _ = conn.Close(); wg.Wait() }) }
	t.Cleanup(c.stop)
	return c
}

// scriptSHAs names the Lua scripts of each of dirs (relative to the
// repository's root) by their SHA1, as EVALSHA names them: SHA1 → file name.
func scriptSHAs(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	shas := map[string]string{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join("..", dir, "*.lua"))
		if err != nil || len(files) == 0 {
			t.Fatalf("perf: scripts of %s: %v (%d found)", dir, err, len(files))
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			h := sha1.Sum(b)
			shas[hex.EncodeToString(h[:])] = filepath.Base(f)
		}
	}
	return shas
}

// perfNATS is the JetStream server of the NATS column: a nats-server
// process beside the dispatchers, as users run it and as redis-server
// runs, whose CPU the table counts apart; or, where no nats-server is on
// the PATH, a server embedded in the test process. Its in_msgs counts the
// messages clients sent it and out_msgs those it sent them.
type perfNATS struct {
	node *testnats.ProcNode // nil when embedded
	srv  *server.Server     // nil when a process
}

// startPerfNATS starts a JetStream server on a free loopback port, stopped
// when the test ends.
func startPerfNATS(t *testing.T) *perfNATS {
	t.Helper()
	if _, err := exec.LookPath("nats-server"); err == nil {
		return &perfNATS{node: testnats.StartProc(t)}
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatalf("perf: nats: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatal("perf: nats not ready after 10s")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return &perfNATS{srv: srv}
}

// url is the server's client URL.
func (n *perfNATS) url() string {
	if n.node != nil {
		return n.node.URL()
	}
	return n.srv.ClientURL()
}

// pid is the server process's id; 0 when embedded in the test process.
func (n *perfNATS) pid() int {
	if n.node != nil {
		return n.node.PID()
	}
	return 0
}

// msgs returns the messages received from and sent to clients so far.
func (n *perfNATS) msgs() (in, out int64) {
	if n.srv != nil {
		v, err := n.srv.Varz(nil)
		if err != nil {
			return 0, 0
		}
		return v.InMsgs, v.OutMsgs
	}
	resp, err := http.Get(n.node.MonitorURL() + "/varz")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	var v struct {
		InMsgs  int64 `json:"in_msgs"`
		OutMsgs int64 `json:"out_msgs"`
	}
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return 0, 0
	}
	return v.InMsgs, v.OutMsgs
}

// openNATSQueue opens c's queue on n as the test's producer.
func openNATSQueue(t *testing.T, n *perfNATS, name string) queue.Queue {
	t.Helper()
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatalf("perf: nats connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	q, err := natsq.New(context.Background(), js, queue.Config{Name: name, Lanes: []string{"vip", "default"}, Consumer: "e2e-producer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// mallocsLine is the Go runtime's count of heap allocations in /metrics.
var mallocsLine = regexp.MustCompile(`(?m)^go_memstats_mallocs_total ([0-9.e+]+)$`)

// mallocs sums go_memstats_mallocs_total over c's replicas.
func mallocs(c *cluster) (float64, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	var sum float64
	for _, p := range c.allProcs() {
		u, ok := p.metricsURL(10 * time.Second)
		if !ok {
			return 0, fmt.Errorf("perf: %s logged no metrics URL", p.name)
		}
		resp, err := client.Get(u)
		if err != nil {
			return 0, fmt.Errorf("perf: scrape %s: %w", p.name, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("perf: scrape %s: %w", p.name, err)
		}
		m := mallocsLine.FindSubmatch(b)
		if m == nil {
			return 0, fmt.Errorf("perf: %s exposes no go_memstats_mallocs_total", p.name)
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			return 0, fmt.Errorf("perf: %s mallocs: %w", p.name, err)
		}
		sum += v
	}
	return sum, nil
}
