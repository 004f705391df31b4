package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/queue"
)

// The real clustered topologies: a 3-master Redis Cluster with a replica
// each, a Sentinel group (master, replica, 3 sentinels) and a 3-node NATS
// JetStream cluster with R3 streams. Each run is 3 dispatcher processes at
// cap 300 draining a backlog with 10% privileged jobs while a producer
// keeps enqueueing, and the node holding the queue is killed mid-run.
// What is asserted: every job the producer had acknowledged is delivered,
// the busiest 1 s and 100 ms windows stay within cap × length + burst
// through the failover, and the privileged jobs go out first. What is
// printed: lost, duplicates, the pause at the failover.

// topology is where a run's queue lives and how its master is lost.
type topology struct {
	backend string
	// env names the topology to the dispatchers (SLUICE_REDIS_*, SLUICE_NATS_*).
	env []string
	// overtake is how many backlog jobs may go out among the privileged
	// ones beyond the slots the replicas hold (see checkPrivilegedFirst).
	overtake int
	// open opens the producer's queue.
	open func(t *testing.T, cfg queue.Config) queue.Queue
	// fail kills the node that holds the queue, waits until another has
	// taken over, then brings the killed node back as a replica (as an
	// operator would: with min_replicas_acked enqueues need one), and
	// returns when it killed and how long the takeover took.
	fail func(t *testing.T, ctx context.Context, queueName string) (killed time.Time, takeover time.Duration)
}

// topologyRate is the cap of the topology runs.
const topologyRate = 300.0

// newTopologyCluster starts the provider and returns a cluster whose queue
// lives on topo; the dispatchers are started by the caller.
func newTopologyCluster(t *testing.T, name string, topo topology, env ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, backend: topo.backend, name: name}
	c.setUp(topologyRate, append(slices.Clone(topo.env), env...))
	c.q = topo.open(t, queue.Config{Name: c.name, Lanes: []string{"vip", "default"}, Consumer: "e2e-producer"})
	return c
}

// topologyName is a queue name unique to this run.
func topologyName() string { return "topo" + fmt.Sprint(time.Now().UnixNano()%1e6) }

// runFailover runs the scenario on topo and checks it: a backlog of 2,000
// jobs, 3 dispatchers, 300 privileged jobs once 100 are out, a producer
// adding 200 jobs/s, the queue's node killed once 900 jobs are delivered,
// the producer stopped a second after the failover, every acknowledged
// job waited for.
//
// It returns the cluster and when the node was killed, for a caller that
// reports more.
func runFailover(t *testing.T, topo topology, name string, maxDup int, env ...string) (*cluster, time.Time) {
	c := newTopologyCluster(t, name, topo, env...)
	backlog := c.enqueue("backlog", "bob", 2000)
	who := newSenders(c.prov) // each replica's arrivals named, for a failing window
	for i := range 3 {
		c.startWith(1, []string{"SLUICE_SINK_URL=" + who.sinkURL(t, fmt.Sprintf("r%d", i))})
	}
	c.waitDelivered(100, 60*time.Second)
	vip := c.enqueue("vip", "alice", 300)
	prod := startProducer(t, c, 200)
	c.waitDelivered(900, 60*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	killed, takeover := topo.fail(t, ctx, c.name)
	t.Logf("failover: a new master/leader %s after the kill; the killed node back as a replica %s after it",
		takeover.Round(10*time.Millisecond), time.Since(killed).Round(10*time.Millisecond))
	eventually(t, 30*time.Second, "the producer acknowledged since the failover", func() bool { return prod.ackedSince(killed.Add(time.Second)) })
	acked, failed := prod.stop()
	t.Logf("producer: %d jobs acknowledged, %d enqueue calls failed (retried)", len(acked), failed)

	ids := slices.Concat(backlog, vip, acked)
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	delivered := func() int {
		n := 0
		for _, a := range c.prov.Arrivals() {
			if a.Delivered() && want[a.JobID] {
				want[a.JobID] = false
				n++
			}
		}
		return n
	}
	got := 0
	poll := func() bool { got += delivered(); return got == len(ids) }
	deadline := time.Now().Add(60 * time.Second)
	for !poll() && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond) // poll interval
	}
	checkTopologyRun(t, c, ids, topo, len(vip), killed, maxDup)
	return c, killed
}

// checkTopologyRun checks and reports a run: lost, duplicates, pause,
// windows and priority.
func checkTopologyRun(t *testing.T, c *cluster, ids []string, topo topology, vips int, killed time.Time, maxDup int) {
	t.Helper()
	arr := c.prov.Arrivals()
	delivered := map[string]int{}
	for _, a := range arr {
		if a.Delivered() {
			delivered[a.JobID]++
		}
	}
	lost, dup := 0, 0
	for _, id := range ids {
		switch n := delivered[id]; {
		case n == 0:
			lost++
		case n > 1:
			dup += n - 1
		}
	}
	times := arrivalTimes(arr)
	pause := longestGap(within(times, killed.Add(-time.Second), killed.Add(30*time.Second)))
	p := promiseOf(t, topologyRate, c.env)
	s := statsOf(times)
	t.Logf("%s: %d jobs acknowledged to the producer, %d arrivals: lost %d, duplicates %d, pause at the failover %s; busiest 1s %d (bound %d), 100ms %d (bound %d)",
		t.Name(), len(ids), len(arr), lost, dup, pause.Round(time.Millisecond), s.Max1s, p.max1s(), s.Max100ms, p.max100ms())
	if lost > 0 {
		t.Errorf("%d acknowledged jobs never delivered; want 0", lost)
	}
	if dup > maxDup {
		t.Errorf("%d duplicates; want at most %d (jobs in flight or acked in the window the failover lost)", dup, maxDup)
	}
	if s.Max1s > p.max1s() {
		t.Errorf("%d arrivals in the 1s from %s; want at most cap + burst = %d", s.Max1s, s.At1s.Format("15:04:05.000"), p.max1s())
	}
	if s.Max100ms > p.max100ms() {
		t.Errorf("%d arrivals in the 100ms from %s (%s after the kill); want at most cap/10 + burst = %d",
			s.Max100ms, s.At100ms.Format("15:04:05.000"), s.At100ms.Sub(killed).Round(time.Millisecond), p.max100ms())
		logAround(t, arr, s.At100ms)
		t.Logf("that window holds, in ms after its start: %s", offsetsText(arr, s.At100ms, 100*time.Millisecond))
	}
	checkPrivilegedFirst(t, arr, vips, 3, topo.overtake, p)
}

// checkPrivilegedFirst asserts that the privileged jobs, queued behind a
// backlog while the dispatchers ran, went out before the rest of it: from
// the first privileged arrival to the last, backlog jobs may only be those
// already holding a slot when the privileged jobs came (a replica holds
// the slots of one horizon at its share of the rate, and one in flight),
// and extra more.
func checkPrivilegedFirst(t *testing.T, arr []mockprovider.Arrival, vips, replicas, extra int, p promise) {
	t.Helper()
	first, last, seen := -1, -1, 0
	for i, a := range arr {
		if a.Lane == "vip" {
			if first < 0 {
				first = i
			}
			last = i
			seen++
		}
	}
	if seen < vips {
		t.Errorf("%d of %d privileged jobs arrived", seen, vips)
		return
	}
	overtook := last - first + 1 - seen
	t.Logf("priority: %d privileged jobs arrived between positions %d and %d, %d backlog jobs among them", seen, first, last, overtook)
	perReplica := int(math.Ceil(p.rate/float64(replicas)*p.horizon.Seconds())) + 1
	if overtook > replicas*perReplica+extra {
		t.Errorf("%d backlog jobs went out among the privileged ones; want at most %d (%d replicas × %d: the slots of one horizon, %s, and one in flight; and %d more)",
			overtook, replicas*perReplica+extra, replicas, perReplica, p.horizon, extra)
	}
}

// logAround logs how many arrivals came in each 20ms from 300ms before at
// to 300ms after.
func logAround(t *testing.T, arr []mockprovider.Arrival, at time.Time) {
	t.Helper()
	var counts [30]int
	for _, a := range arr {
		if d := a.At.Sub(at) + 300*time.Millisecond; d >= 0 && d < 600*time.Millisecond {
			counts[d/(20*time.Millisecond)]++
		}
	}
	t.Logf("arrivals by 20ms from 300ms before %s: %v", at.Format("15:04:05.000"), counts)
}

// longestGap is the longest time between two consecutive sorted times.
func longestGap(times []time.Time) time.Duration {
	var g time.Duration
	for i := 1; i < len(times); i++ {
		g = max(g, times[i].Sub(times[i-1]))
	}
	return g
}

// liveProducer enqueues jobs at a steady rate through a queue, as an
// application would, retrying a batch that failed, and records which ids
// were acknowledged.
type liveProducer struct {
	mu      sync.Mutex
	acked   []string
	lastAck time.Time
	failed  int
	quit    chan struct{}
	done    chan struct{}
}

// startProducer enqueues perSecond jobs a second (user bob, idempotency
// key = id, ids live-00000...) into c's queue until stop. Each call
// enqueues the jobs due by then, so a slow enqueue (waiting for replicas)
// does not slow the rate.
func startProducer(t *testing.T, c *cluster, perSecond int) *liveProducer {
	p := &liveProducer{quit: make(chan struct{}), done: make(chan struct{})}
	go p.run(c, perSecond)
	t.Cleanup(func() { p.stop() })
	return p
}

func (p *liveProducer) run(c *cluster, perSecond int) {
	defer close(p.done)
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	next := 0
	for {
		select {
		case <-p.quit:
			return
		case <-tick.C:
		}
		due := min(int(time.Since(start).Seconds()*float64(perSecond)), next+100)
		if due <= next {
			continue
		}
		jobs := make([]*queue.Job, 0, due-next)
		for i := next; i < due; i++ {
			id := fmt.Sprintf("live-%05d", i)
			j := &queue.Job{ID: id, Key: id, User: "bob", Payload: json.RawMessage(`{"to":"+15550100","text":"live"}`)}
			j.Lane = c.prio.Route(j)
			jobs = append(jobs, j)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := c.q.Enqueue(ctx, jobs...)
		cancel()
		p.mu.Lock()
		if err != nil {
			p.failed++
		} else {
			for _, j := range jobs {
				p.acked = append(p.acked, j.ID)
			}
			p.lastAck = time.Now()
			next = due
		}
		p.mu.Unlock()
	}
}

// count returns how many jobs were acknowledged so far.
func (p *liveProducer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// ackedSince reports whether an enqueue was acknowledged after t.
func (p *liveProducer) ackedSince(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastAck.After(t)
}

// stop stops the producer and returns the acknowledged ids and the
// number of failed calls.
func (p *liveProducer) stop() ([]string, int) {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.acked), p.failed
}
