package testredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions say how StartSentinelGroup starts its servers. The zero
// value is a replica linked directly to its master, watched by three
// sentinels under the name "sluice".
type SentinelOptions struct {
	// MasterName is the name the sentinels monitor the master under.
	// Zero means "sluice".
	MasterName string
	// Link, when set, is given the master's address and returns the one
	// the replica replicates from: a proxy in front of the master, to
	// slow or cut replication alone.
	Link func(masterAddr string) string
}

// SentinelGroup is a master, its replica and three sentinels, all real
// processes owned by a test. A master down for sentinelDownAfter is
// failed over to the replica.
type SentinelGroup struct {
	t          testing.TB
	MasterName string
	Master     *Server
	Replica    *Server
	Sentinels  []*Sentinel

	sentinelLogs []string // each sentinel's log file, in Sentinels' order
}

// sentinelDownAfter is the sentinels' down-after-milliseconds. It must
// stay well above a second, Sentinel's own ping and reconnect period: at
// +switch-master each sentinel resets its link to the new master, and
// with 1s the new master was at times marked down about 1s later,
// before the new link's first PONG, though it was serving clients; two
// sentinels doing so failed it over again, to the old master just back as
// its replica, and the writes of the second between it and the clients'
// switch (about a second) were lost: 330 duplicates instead of 60, and
// pacer state lost with them (303 in 1s against 301).
const sentinelDownAfter = 2 * time.Second

// StartSentinelGroup starts the group, waits until the replica is in sync
// and every sentinel knows the replica and the two other sentinels, and
// stops every process when the test ends. It skips the test without
// redis-server.
func StartSentinelGroup(t testing.TB, opts SentinelOptions) *SentinelGroup {
	t.Helper()
	requireBinaries(t, "redis-server")
	g := &SentinelGroup{t: t, MasterName: opts.MasterName}
	if g.MasterName == "" {
		g.MasterName = "sluice"
	}
	g.Master = Start(t, Options{})
	link := g.Master.Addr()
	if opts.Link != nil {
		link = opts.Link(link)
	}
	g.Replica = Start(t, Options{ReplicaOf: link})
	host, port, _ := net.SplitHostPort(g.Master.Addr())
	for range 3 {
		conf := fmt.Sprintf("sentinel monitor %s %s %s 2\n"+
			"sentinel down-after-milliseconds %s %d\n"+
			"sentinel failover-timeout %s 10000\n"+
			"sentinel parallel-syncs %s 1\n",
			g.MasterName, host, port, g.MasterName, sentinelDownAfter.Milliseconds(), g.MasterName, g.MasterName)
		s, log := startSentinel(t, conf)
		g.Sentinels = append(g.Sentinels, s)
		g.sentinelLogs = append(g.sentinelLogs, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.waitKnown(ctx); err != nil {
		t.Fatal(err)
	}
	return g
}

// Addrs returns the sentinels' host:port.
func (g *SentinelGroup) Addrs() []string {
	out := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		out[i] = s.Addr
	}
	return out
}

// Client returns a failover client that finds the master through the
// sentinels, closed when the test ends.
func (g *SentinelGroup) Client() *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: g.MasterName, SentinelAddrs: g.Addrs(), MaxRetries: -1})
	g.t.Cleanup(func() { _ = c.Close() })
	return c
}

// MasterAddr returns the master's address as the sentinels name it now.
func (g *SentinelGroup) MasterAddr(ctx context.Context) (string, error) {
	var last error
	for _, s := range g.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		a, err := sc.GetMasterAddrByName(ctx, g.MasterName).Result()
		_ = sc.Close()
		if err == nil && len(a) == 2 {
			return net.JoinHostPort(a[0], a[1]), nil
		}
		last = err
	}
	return "", fmt.Errorf("testredis: no sentinel names the master: %w", last)
}

// WaitMaster waits until every sentinel names addr as the master and addr
// answers as a master, or ctx ends.
func (g *SentinelGroup) WaitMaster(ctx context.Context, addr string) error {
	for {
		if g.allName(ctx, addr) && isMaster(ctx, addr) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testredis: sentinels do not name %s as master: %w", addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (g *SentinelGroup) allName(ctx context.Context, addr string) bool {
	for _, s := range g.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		a, err := sc.GetMasterAddrByName(ctx, g.MasterName).Result()
		_ = sc.Close()
		if err != nil || len(a) != 2 || net.JoinHostPort(a[0], a[1]) != addr {
			return false
		}
	}
	return true
}

// isMaster reports whether the server at addr says it is a master.
func isMaster(ctx context.Context, addr string) bool {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	role, err := c.Do(ctx, "ROLE").Slice()
	return err == nil && len(role) > 0 && role[0] == "master"
}

// waitKnown waits until the replica is in sync with the master and every
// sentinel knows the master, one replica and two other sentinels: only
// then can the group fail over.
func (g *SentinelGroup) waitKnown(ctx context.Context) error {
	rc := redis.NewClient(&redis.Options{Addr: g.Replica.Addr(), MaxRetries: -1})
	defer rc.Close()
	for {
		if g.known(ctx, rc) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testredis: sentinel group not ready: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (g *SentinelGroup) known(ctx context.Context, replica *redis.Client) bool {
	info, err := replica.Info(ctx, "replication").Result()
	if err != nil || !strings.Contains(info, "master_link_status:up") {
		return false
	}
	for _, s := range g.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		reps, err1 := sc.Replicas(ctx, g.MasterName).Result()
		sens, err2 := sc.Sentinels(ctx, g.MasterName).Result()
		_ = sc.Close()
		if err1 != nil || err2 != nil || len(reps) != 1 || len(sens) != len(g.Sentinels)-1 {
			return false
		}
		if flags := reps[0]["flags"]; flags != "slave" {
			return false
		}
	}
	return true
}

// startSentinel starts `redis-server sentinel.conf --sentinel` on a free
// port with conf's lines, stopped when the test ends, and returns it and
// its log file.
func startSentinel(t testing.TB, conf string) (*Sentinel, string) {
	t.Helper()
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "sentinel.conf")
		logfile := filepath.Join(dir, "sentinel.log")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n%s", port, dir, logfile, conf)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("redis-server", path, "--sentinel")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("testredis: start sentinel: %v", err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = waitReady(addr, done); lastErr != nil {
			_ = cmd.Process.Kill()
			<-done
			continue
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
		return &Sentinel{Addr: addr}, logfile
	}
	t.Fatalf("testredis: start sentinel: %v", lastErr)
	return nil, ""
}

// LogLine is a line of the log of one of a group's processes.
type LogLine struct {
	At   time.Time // the time Redis stamped it with (ms)
	Who  string    // "master", "replica" (as started) or "sentinel-<i>"
	Text string    // the line after its time: level mark and message
}

// Logs returns the lines the group's processes logged at or after since,
// in time order: the servers' replication (syncs, lost links, role
// changes) and the sentinels' events (+sdown, +odown, +elected-leader,
// +promoted-slave, +switch-master...). The killed and restarted master's
// lines of both lives are there: it logs to the same file.
func (g *SentinelGroup) Logs(since time.Time) []LogLine {
	files := []struct{ who, path string }{
		{"master", filepath.Join(g.Master.dir, "redis.log")},
		{"replica", filepath.Join(g.Replica.dir, "redis.log")},
	}
	for i, p := range g.sentinelLogs {
		files = append(files, struct{ who, path string }{fmt.Sprintf("sentinel-%d", i), p})
	}
	var out []LogLine
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if l, ok := parseLogLine(f.who, strings.TrimRight(line, "\n")); ok && !l.At.Before(since) {
				out = append(out, l)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b LogLine) int { return a.At.Compare(b.At) })
	return out
}

// parseLogLine reads a Redis log line, "pid:R 02 Jan 2006 15:04:05.000 *
// message"; ok is false for any other line (the start-up banner).
func parseLogLine(who, line string) (LogLine, bool) {
	f := strings.SplitN(line, " ", 6)
	if len(f) < 6 || !strings.Contains(f[0], ":") {
		return LogLine{}, false
	}
	at, err := time.ParseInLocation("02 Jan 2006 15:04:05.000", strings.Join(f[1:5], " "), time.Local)
	if err != nil {
		return LogLine{}, false
	}
	return LogLine{At: at, Who: who, Text: f[5]}, true
}
