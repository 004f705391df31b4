package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// replicationLag is the delay put on a replica's link to its master
// (Sentinel, and Redis Cluster in the lag test): what it has not received
// when the master dies is lost.
const replicationLag = 200 * time.Millisecond

// waitTimeout is redis.min_replicas_timeout in these runs: above the lag,
// so that an enqueue is confirmed rather than refused.
const waitTimeout = time.Second

// openRedis returns an open func for a redisq queue on client, waiting
// for minReplicas replicas.
func openRedis(client redis.UniversalClient, minReplicas int) func(*testing.T, queue.Config) queue.Queue {
	return func(t *testing.T, cfg queue.Config) queue.Queue {
		q, err := redisq.New(client, cfg, redisq.WithMinReplicas(minReplicas, waitTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.Close() })
		return q
	}
}

// laneKey is a key of the queue's slot.
func laneKey(queueName string) string { return "sluice:{" + queueName + "}:lane:default" }

// TestTopologyRedisCluster: the queue and the pacer on a real 3-master
// Redis Cluster with a replica each, enqueues waiting for 1 replica; the
// master of the queue's slot is killed mid-run.
func TestTopologyRedisCluster(t *testing.T) {
	rc := testredis.StartCluster(t, 3, 1)
	addrs := rc.Addrs()
	topo := topology{
		backend: "redis",
		// A failover during the privileged burst: backlog jobs whose ack
		// was lost at the kill come back at the front of their lane, and a
		// replica that reconnects refetches; a tenth of the privileged
		// count may go out among them.
		overtake: 300 / 10,
		env: []string{
			"SLUICE_REDIS_URL=redis://" + addrs[0] + "/0",
			"SLUICE_REDIS_CLUSTER_ADDRS=" + strings.Join(addrs[1:], ","),
			"SLUICE_REDIS_MIN_REPLICAS_ACKED=1",
			"SLUICE_REDIS_MIN_REPLICAS_TIMEOUT=" + waitTimeout.String(),
		},
		open: openRedis(rc.Client(), 1),
		fail: func(t *testing.T, ctx context.Context, name string) (time.Time, time.Duration) {
			master, err := rc.MasterFor(ctx, laneKey(name))
			if err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			master.Kill()
			if _, err := rc.WaitFailover(ctx, laneKey(name), master); err != nil {
				t.Fatal(err)
			}
			takeover := time.Since(killed)
			master.Restart() // rejoins from its nodes.conf, as a replica of the new master
			if err := rc.WaitOK(ctx); err != nil {
				t.Fatal(err)
			}
			return killed, takeover
		},
	}
	// Duplicates: jobs in flight when the master died, at most a second
	// of the cap.
	runFailover(t, topo, topologyName(), int(topologyRate))
}

// sentinelTopology is a Sentinel group whose replica replicates through a
// link delayed by replicationLag, the master lost with its link (cut,
// then killed) as when its host fails. At the kill it logs how far the
// replica was behind (offsets, and what the link held and dropped) and
// how far behind it was at worst over the run.
func sentinelTopology(t *testing.T, minReplicas int) (topology, *testredis.SentinelGroup) {
	var link *lagLink
	g := testredis.StartSentinelGroup(t, testredis.SentinelOptions{Link: func(master string) string {
		link = newLagLink(t, master)
		return link.addr()
	}})
	link.setLag(replicationLag)
	sampler := startReplSampler(t, g)
	return topology{
		backend: "redis",
		// A failover during the privileged burst: backlog jobs whose ack
		// was lost at the kill come back at the front of their lane, and a
		// replica that reconnects refetches; a tenth of the privileged
		// count may go out among them.
		overtake: 300 / 10,
		env: []string{
			"SLUICE_REDIS_URL=redis://127.0.0.1:6379/0", // the host comes from the sentinels
			"SLUICE_REDIS_SENTINEL_MASTER_NAME=" + g.MasterName,
			"SLUICE_REDIS_SENTINEL_ADDRS=" + strings.Join(g.Addrs(), ","),
			"SLUICE_REDIS_MIN_REPLICAS_ACKED=" + strconv.Itoa(minReplicas),
			"SLUICE_REDIS_MIN_REPLICAS_TIMEOUT=" + waitTimeout.String(),
		},
		open: openRedis(g.Client(), minReplicas),
		fail: func(t *testing.T, ctx context.Context, _ string) (time.Time, time.Duration) {
			sampler.stop()
			before := replicationState(ctx, sampler)
			killed := time.Now()
			link.cut()
			g.Master.Kill()
			t.Logf("at the kill: %s", before)
			t.Logf("at the kill: %s", linkText(link.cutStats(), killed))
			t.Logf("before the kill: %s", sampler.summary(killed))
			if err := g.WaitMaster(ctx, g.Replica.Addr()); err != nil {
				t.Fatal(err)
			}
			takeover := time.Since(killed)
			// Back, empty, as a replica of the new master from its first
			// moment (what the sentinels would tell it once they see it
			// again). Restarted as a master and told REPLICAOF only after,
			// it was an empty master for a moment: a replica that dialled
			// it then got slots from a second, empty schedule (303 in the
			// busiest 1s against 301, once in five runs).
			g.Master.RestartAsReplicaOf(g.Replica.Addr())
			return killed, takeover
		},
	}, g
}

// TestTopologySentinel: the queue and the pacer behind Sentinel, with
// 200ms of replication lag and enqueues waiting for 1 replica; the master
// is lost mid-run. Duplicates: jobs fetched (and acks sent) in the last
// 200ms, which the replica never got.
//
// With the sentinels' down-after at 1s, about one run in eight left
// 330–360 duplicates and once 303 arrivals in 1s:
// the sentinels marked the new master down about 1s after switching to it
// and failed over a second time (see sentinelDownAfter). The run logs
// what would explain such a run: the replication state at the kill, the
// group's log around the failover, when and by whom the duplicates were
// sent; and it fails on a second failover.
func TestTopologySentinel(t *testing.T) {
	start := time.Now()
	topo, g := sentinelTopology(t, 1)
	runSentinelFailover(t, topo, g, start)
}

// TestTopologySentinelLag shows what redis.min_replicas_acked is for, on
// the queue alone: a producer enqueues 200 jobs/s behind Sentinel with
// 200ms of replication lag and the master is lost. Without the wait, jobs
// acknowledged to the producer are missing on the new master; with it,
// none is.
func TestTopologySentinelLag(t *testing.T) {
	for _, tc := range lagCases {
		t.Run(tc.name, func(t *testing.T) {
			topo, g := sentinelTopology(t, tc.replicas)
			runLagLoss(t, topo, g.Client(), tc.replicas)
		})
	}
}

// clusterLagTopology is a 3-master Redis Cluster with a replica each
// whose nodes announce a link from newReplLink in front of them, so that every
// replica's stream lags replicationLag (clients are not delayed); the
// master of the queue's slot is lost with its link (cut, then killed) as
// when its host fails, and comes back without it as a replica of the new
// master.
func clusterLagTopology(t *testing.T, minReplicas int) (topology, *testredis.Cluster) {
	links := map[string]*lagLink{} // by the node's own address
	rc := testredis.StartClusterWith(t, testredis.ClusterOptions{Masters: 3, ReplicasPerMaster: 1,
		Link: func(node string) string {
			l := newReplLink(t, node)
			links[node] = l
			return l.addr()
		}})
	for _, l := range links {
		l.setLag(replicationLag)
	}
	addrs := rc.Addrs()
	return topology{
		backend:  "redis",
		overtake: 300 / 10, // as TestTopologyRedisCluster
		env: []string{
			"SLUICE_REDIS_URL=redis://" + addrs[0] + "/0",
			"SLUICE_REDIS_CLUSTER_ADDRS=" + strings.Join(addrs[1:], ","),
			"SLUICE_REDIS_MIN_REPLICAS_ACKED=" + strconv.Itoa(minReplicas),
			"SLUICE_REDIS_MIN_REPLICAS_TIMEOUT=" + waitTimeout.String(),
		},
		open: openRedis(rc.Client(), minReplicas),
		fail: func(t *testing.T, ctx context.Context, name string) (time.Time, time.Duration) {
			master, err := rc.MasterFor(ctx, laneKey(name))
			if err != nil {
				t.Fatal(err)
			}
			link := links[master.Addr()]
			if link == nil || link.replicas() == 0 {
				t.Fatalf("no replica replicates from %s through its link: the lag is not where the test needs it", master.Addr())
			}
			killed := time.Now()
			link.cut()
			master.Kill()
			if _, err := rc.WaitFailover(ctx, laneKey(name), master); err != nil {
				t.Fatal(err)
			}
			takeover := time.Since(killed)
			// Back from its nodes.conf as a replica of the new master (an
			// enqueue waiting for a replica needs one), announcing its own
			// address: its link died with it.
			master.Restart()
			if err := rc.WaitOK(ctx); err != nil {
				t.Fatal(err)
			}
			return killed, takeover
		},
	}, rc
}

// TestTopologyRedisClusterLag is TestTopologySentinelLag on a real
// 3-master Redis Cluster with a replica each: a producer enqueues 200
// jobs/s with 200ms of replication lag and the master of the queue's
// slot is killed. Without the wait, jobs acknowledged to the producer are
// missing on the new master; with it, none is.
func TestTopologyRedisClusterLag(t *testing.T) {
	for _, tc := range lagCases {
		t.Run(tc.name, func(t *testing.T) {
			topo, rc := clusterLagTopology(t, tc.replicas)
			runLagLoss(t, topo, rc.Client(), tc.replicas)
		})
	}
}

// lagCases are the lag tests' runs: enqueues not waiting for a replica,
// then waiting for one.
var lagCases = []struct {
	name     string
	replicas int
}{{"off", 0}, {"on", 1}}

// runLagLoss runs a producer at 200 jobs/s on topo until it has 1s of
// jobs acknowledged, loses the master, lets the producer go on until an
// enqueue is acknowledged by the new master, and counts the acknowledged
// jobs that rc (a client of the topology) no longer finds: some are
// wanted without the wait (minReplicas 0), none with it.
func runLagLoss(t *testing.T, topo topology, rc redis.UniversalClient, minReplicas int) {
	t.Helper()
	c := newTopologyCluster(t, topologyName(), topo)
	prod := startProducer(t, c, 200)
	eventually(t, 30*time.Second, "the producer acknowledged 1s of jobs", func() bool { return prod.count() >= 200 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, failover := topo.fail(t, ctx, c.name)
	after := time.Now()
	eventually(t, 30*time.Second, "the producer acknowledged since the failover", func() bool { return prod.ackedSince(after) })
	acked, failed := prod.stop()
	stored := storedIDs(t, ctx, rc, c.name)
	lost := 0
	for _, id := range acked {
		if !stored[id] {
			lost++
		}
	}
	t.Logf("min_replicas_acked %d, lag %s: %d acknowledged, %d enqueue calls failed (retried), failover %s: %d acknowledged jobs lost",
		minReplicas, replicationLag, len(acked), failed, failover.Round(10*time.Millisecond), lost)
	switch {
	case minReplicas == 0 && lost == 0:
		t.Errorf("no acknowledged job lost without the wait; want some lost to the %s lag (else this test shows nothing)", replicationLag)
	case minReplicas > 0 && lost > 0:
		t.Errorf("%d acknowledged jobs lost with min_replicas_acked %d; want 0", lost, minReplicas)
	}
}

// storedIDs returns the ids of the jobs in the queue's lane streams.
func storedIDs(t *testing.T, ctx context.Context, rc redis.UniversalClient, name string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for _, lane := range []string{"vip", "default"} {
		msgs, err := rc.XRange(ctx, "sluice:{"+name+"}:lane:"+lane, "-", "+").Result()
		if err != nil {
			t.Fatalf("read lane %s: %v", lane, err)
		}
		for _, m := range msgs {
			if id, ok := m.Values["id"].(string); ok {
				ids[id] = true
			}
		}
	}
	return ids
}

// runSentinelFailover is runFailover on a Sentinel group, then logs
// what would explain a run with more duplicates than the lag explains:
// the group's log (syncs, lost links, the sentinels' failover) from start
// on, when the duplicated jobs were first sent and sent again relative to
// the kill and by which replica, and the dispatchers' warnings.
func runSentinelFailover(t *testing.T, topo topology, g *testredis.SentinelGroup, start time.Time) {
	c, killed := runFailover(t, topo, topologyName(), int(topologyRate))
	t.Logf("group log (replication before the kill, everything from 2s before it):\n%s", groupLogText(g, start, killed))
	if n := switches(g.Logs(killed)); n != 1 {
		// A second failover (the sentinels once marked a healthy new
		// master down) demotes a master that clients still write to: what
		// they wrote until they follow is lost, queue and pacer alike.
		t.Errorf("the sentinels switched the master %d times after the kill; want 1", n)
	}
	t.Logf("duplicates: %s", duplicatesText(c.prov.Arrivals(), killed))
	for _, p := range c.allProcs() {
		t.Logf("%s warnings from 1s before the kill:\n%s", p.name, warningsText(p.log, killed.Add(-time.Second), 12))
	}
}

// replSampler samples the master's and the replica's replication offsets
// every 50ms until stopped, so that the replica's distance behind the
// master can be told in time.
type replSampler struct {
	master, replica *redis.Client
	quit, done      chan struct{}

	mu        sync.Mutex
	hist      []offsetAt    // the master's offset, in time order
	maxBehind time.Duration // the most the replica was behind
	maxAt     time.Time     // when
	linkDown  []time.Time   // samples where the replica's link was not up
	syncs     string        // the master's sync counts at the last sample
}

type offsetAt struct {
	at     time.Time
	offset int64
}

func startReplSampler(t *testing.T, g *testredis.SentinelGroup) *replSampler {
	s := &replSampler{master: g.Master.Client(), replica: g.Replica.Client(), quit: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	t.Cleanup(s.stop)
	return s
}

func (s *replSampler) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

func (s *replSampler) run() {
	defer close(s.done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m, err1 := s.master.Info(ctx, "replication", "stats").Result()
		r, err2 := s.replica.Info(ctx, "replication").Result()
		cancel()
		if err1 != nil || err2 != nil {
			continue
		}
		now := time.Now()
		mf, rf := infoFields(m), infoFields(r)
		mo, _ := strconv.ParseInt(mf["master_repl_offset"], 10, 64)
		ro, _ := strconv.ParseInt(rf["slave_repl_offset"], 10, 64)
		s.mu.Lock()
		s.hist = append(s.hist, offsetAt{now, mo})
		if b := s.behind(ro, now); b > s.maxBehind {
			s.maxBehind, s.maxAt = b, now
		}
		if rf["master_link_status"] != "up" {
			s.linkDown = append(s.linkDown, now)
		}
		s.syncs = syncCounts(mf)
		s.mu.Unlock()
	}
}

// behind is how long before now the master first had more than offset:
// at least that long the replica is behind. Call with s.mu held.
func (s *replSampler) behind(offset int64, now time.Time) time.Duration {
	i, _ := slices.BinarySearchFunc(s.hist, offset+1, func(o offsetAt, v int64) int {
		switch {
		case o.offset < v:
			return -1
		case o.offset > v:
			return 1
		}
		return 0
	})
	if i == len(s.hist) {
		return 0
	}
	return now.Sub(s.hist[i].at)
}

// summary tells the worst lag over the samples and the links down.
func (s *replSampler) summary(killed time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	text := fmt.Sprintf("%d samples; the replica at most %s behind the master (%s before the kill); its link down in %d samples",
		len(s.hist), s.maxBehind.Round(time.Millisecond), killed.Sub(s.maxAt).Round(time.Millisecond), len(s.linkDown))
	if len(s.linkDown) > 0 {
		text += fmt.Sprintf(" (first %s, last %s before the kill)",
			killed.Sub(s.linkDown[0]).Round(time.Millisecond), killed.Sub(s.linkDown[len(s.linkDown)-1]).Round(time.Millisecond))
	}
	return text + "; master " + s.syncs
}

// replicationState reads, just before the kill, the master's and the
// replica's offsets and the master's sync counts.
func replicationState(ctx context.Context, s *replSampler) string {
	ictx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	m, err := s.master.Info(ictx, "replication", "stats").Result()
	if err != nil {
		return "master INFO: " + err.Error()
	}
	r, err := s.replica.Info(ictx, "replication").Result()
	if err != nil {
		return "replica INFO: " + err.Error()
	}
	now := time.Now()
	mf, rf := infoFields(m), infoFields(r)
	mo, _ := strconv.ParseInt(mf["master_repl_offset"], 10, 64)
	ro, _ := strconv.ParseInt(rf["slave_repl_offset"], 10, 64)
	s.mu.Lock()
	behind := s.behind(ro, now)
	s.mu.Unlock()
	return fmt.Sprintf("master_repl_offset %d, replica's slave_repl_offset %d: %d bytes (at least %s) behind; replica link %s, last io %ss ago; the master sees %s; master %s",
		mo, ro, mo-ro, behind.Round(time.Millisecond), rf["master_link_status"], rf["master_last_io_seconds_ago"], mf["slave0"], syncCounts(mf))
}

func syncCounts(f map[string]string) string {
	return fmt.Sprintf("sync_full %s, sync_partial_ok %s, sync_partial_err %s", f["sync_full"], f["sync_partial_ok"], f["sync_partial_err"])
}

// infoFields parses an INFO reply into its fields.
func infoFields(info string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// linkText tells what each connection through the link carried and what
// the cut dropped.
func linkText(stats []pipeStats, killed time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the lag link had %d connection(s)", len(stats))
	for i, st := range stats {
		fmt.Fprintf(&b, "; #%d accepted %s before the kill: %d bytes read, %d delivered, dropped %d",
			i, killed.Sub(st.Accepted).Round(time.Millisecond), st.In, st.Out, st.In-st.Out)
		if !st.Oldest.IsZero() {
			fmt.Fprintf(&b, " read over the last %s", killed.Sub(st.Oldest).Round(time.Millisecond))
		}
		fmt.Fprintf(&b, ", delivered at most %s late", st.MaxLate.Round(time.Millisecond))
	}
	return b.String()
}

// replicationLine picks the servers' replication lines and the sentinels'
// failover events out of the group's log.
var replicationLine = regexp.MustCompile(`(?i)sync|lost|master|timeout|tilt|sdown|odown|failover|switch|promot|convert|reboot|role|elected`)

// groupLogText is the group's log from start: replication lines up to
// 2s before the kill, every line after.
func groupLogText(g *testredis.SentinelGroup, start, killed time.Time) string {
	var b strings.Builder
	n := 0
	for _, l := range g.Logs(start) {
		if l.At.Before(killed.Add(-2*time.Second)) && !replicationLine.MatchString(l.Text) {
			continue
		}
		if n++; n > 150 {
			b.WriteString("  ...\n")
			break
		}
		fmt.Fprintf(&b, "  %+8.3fs %-10s %s\n", l.At.Sub(killed).Seconds(), l.Who, l.Text)
	}
	return b.String()
}

// duplicatesText tells, of the jobs delivered more than once, when they
// were first sent and sent again (by 100ms, relative to the kill), by
// which replica, with which attempt numbers, and which jobs they were.
func duplicatesText(arr []mockprovider.Arrival, killed time.Time) string {
	byJob := map[string][]mockprovider.Arrival{}
	for _, a := range arr {
		if a.Delivered() {
			byJob[a.JobID] = append(byJob[a.JobID], a)
		}
	}
	firsts := map[int]int{}   // 100ms bucket from the kill -> jobs first sent then
	agains := map[int]int{}   // 100ms bucket -> repeat deliveries then
	pairs := map[string]int{} // "first sender>repeat sender" -> repeats
	attempts := map[string]int{}
	kinds := map[string]int{}
	var sameSender, n int
	var dupIDs []string
	lastBefore := map[string]int{} // kind -> highest index sent before the kill
	for id, as := range byJob {
		kind, num, _ := strings.Cut(id, "-")
		if i, err := strconv.Atoi(num); err == nil && as[0].At.Before(killed) {
			lastBefore[kind] = max(lastBefore[kind], i)
		}
		if len(as) < 2 {
			continue
		}
		slices.SortFunc(as, func(a, b mockprovider.Arrival) int { return a.At.Compare(b.At) })
		firsts[bucket(as[0].At, killed)]++
		dupIDs = append(dupIDs, id)
		for _, a := range as[1:] {
			n++
			agains[bucket(a.At, killed)]++
			pairs[senderOf(as[0])+">"+senderOf(a)]++
			if senderOf(as[0]) == senderOf(a) {
				sameSender++
			}
			attempts[fmt.Sprintf("%d>%d", as[0].Attempt, a.Attempt)]++
			kinds[kind]++
		}
	}
	if n == 0 {
		return "none"
	}
	return fmt.Sprintf("%d repeat deliveries (%d by the replica that sent the job first); jobs first sent, by 100ms from the kill: %s; sent again: %s; first>repeat sender: %v; first>repeat attempt: %v; by kind: %v; the jobs: %s (highest index first sent before the kill: %v)",
		n, sameSender, bucketsText(firsts), bucketsText(agains), pairs, attempts, kinds, rangesText(dupIDs), lastBefore)
}

// rangesText writes ids ("kind-00012") as runs of consecutive indexes
// by kind: "backlog 12-40 43".
func rangesText(ids []string) string {
	byKind := map[string][]int{}
	for _, id := range ids {
		kind, num, _ := strings.Cut(id, "-")
		if i, err := strconv.Atoi(num); err == nil {
			byKind[kind] = append(byKind[kind], i)
		}
	}
	var parts []string
	for _, kind := range slices.Sorted(maps.Keys(byKind)) {
		idx := byKind[kind]
		slices.Sort(idx)
		part := kind
		for i := 0; i < len(idx); {
			j := i
			for j+1 < len(idx) && idx[j+1] <= idx[j]+1 {
				j++
			}
			if j == i {
				part += fmt.Sprintf(" %d", idx[i])
			} else {
				part += fmt.Sprintf(" %d-%d", idx[i], idx[j])
			}
			i = j + 1
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// bucket is the 100ms interval of at relative to killed (0: the first
// 100ms after the kill, -1 the last before it).
func bucket(at, killed time.Time) int {
	d := at.Sub(killed)
	b := int(d / (100 * time.Millisecond))
	if d < 0 {
		b--
	}
	return b
}

func bucketsText(m map[int]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%+.1fs:%d", float64(k)/10, m[k])
	}
	return strings.Join(parts, " ")
}

// warningsText returns the WARN and ERROR lines of a dispatcher's log
// stamped at or after since: how many of each message, and the first
// line of each (at most max messages).
func warningsText(path string, since time.Time, max int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  " + err.Error()
	}
	var order []string
	first, count := map[string]string{}, map[string]int{}
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
			continue
		}
		if ts, ok := strings.CutPrefix(line, "time="); ok {
			f, _, _ := strings.Cut(ts, " ")
			if at, err := time.Parse(time.RFC3339Nano, f); err == nil && at.Before(since) {
				continue
			}
		}
		msg := line
		if _, m, ok := strings.Cut(line, "msg="); ok {
			msg, _, _ = strings.Cut(m, "\" ")
		}
		if count[msg]++; count[msg] == 1 {
			order = append(order, msg)
			first[msg] = strings.TrimRight(line, "\n")
		}
	}
	var out []string
	for i, msg := range order {
		if i == max {
			out = append(out, fmt.Sprintf("  ... %d more messages", len(order)-max))
			break
		}
		out = append(out, fmt.Sprintf("  %d× %s", count[msg], first[msg]))
	}
	return strings.Join(out, "\n")
}

// switches counts the distinct +switch-master events in lines: each
// sentinel logs each failover once.
func switches(lines []testredis.LogLine) int {
	seen := map[string]bool{}
	for _, l := range lines {
		if _, ev, ok := strings.Cut(l.Text, "+switch-master "); ok {
			seen[ev] = true
		}
	}
	return len(seen)
}
