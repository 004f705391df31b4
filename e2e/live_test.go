package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// A provider slower than the visibility timeout gets every job once: the
// replicas keep a job alive while its request is open, so no other replica
// (nor the same one) is handed it again. 20 jobs, two replicas, answers
// after 6s, queue.visibility_timeout 5s, sink.timeout 10s.
func TestLiveSlowProvider(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) {
			const jobs = 20
			const answerAfter = 6 * time.Second
			c := newCluster(t, backend, 50,
				"SLUICE_QUEUE_VISIBILITY_TIMEOUT=5s", "SLUICE_SINK_TIMEOUT=10s")
			c.prov.SetResponder(func(mockprovider.Arrival) mockprovider.Answer {
				return mockprovider.Answer{Status: 200, Delay: answerAfter}
			})
			ids := c.enqueue("slow", "bob", jobs)
			c.start(2)
			c.waitDelivered(jobs, 40*time.Second)
			// Once no job is ready, delayed or in flight, no job can reach
			// the provider again: every arrival is in.
			eventually(t, 20*time.Second, "the queue empty, every job acked", func() bool {
				st, err := c.q.Stats(context.Background())
				if err != nil {
					return false
				}
				for _, l := range st.Lanes {
					if l.Ready+l.Delayed+l.InFlight > 0 {
						return false
					}
				}
				return st.DeadLetters == 0
			})
			count := map[string]int{}
			var first, last time.Time
			for _, a := range c.prov.Arrivals() {
				count[a.JobID]++
				if first.IsZero() || a.At.Before(first) {
					first = a.At
				}
				if a.At.After(last) {
					last = a.At
				}
			}
			for _, id := range ids {
				if count[id] != 1 {
					t.Errorf("job %s reached the provider %d times, want once", id, count[id])
				}
			}
			if len(count) != jobs {
				t.Errorf("%d distinct jobs reached the provider, want %d", len(count), jobs)
			}
			t.Logf("%s: %d jobs, %d arrivals, first to last arrival %s; each answered after %s with a %s visibility timeout",
				backend, jobs, len(c.prov.Arrivals()), last.Sub(first).Round(time.Millisecond), answerAfter, 5*time.Second)
		})
	}
}

// Replicas killed with kill -9 leave their consumer in the lane groups of
// Redis; the live replicas remove each one once the others have claimed
// its jobs and it has been idle for queue.consumer_idle_limit. Six
// replicas are killed, one after another, while two others keep sending.
func TestLiveDeadConsumersRemoved(t *testing.T) {
	const (
		jobs      = 8000 // 40s at the cap: the run outlasts the test
		rate      = 200.0
		idleLimit = 3 * time.Second
	)
	c := newCluster(t, "redis", rate, "SLUICE_QUEUE_VISIBILITY_TIMEOUT=2s",
		"SLUICE_QUEUE_CONSUMER_IDLE_LIMIT="+idleLimit.String())
	c.enqueue("dead", "bob", jobs)
	rdb := c.redis.Client()
	ctx := context.Background()
	streams := []string{"sluice:{" + c.name + "}:lane:vip", "sluice:{" + c.name + "}:lane:default"}
	consumers := func(stream string) []redis.XInfoConsumer {
		cs, err := rdb.XInfoConsumers(ctx, stream, "sluice").Result()
		if err != nil && !strings.Contains(err.Error(), "NOGROUP") && !strings.Contains(err.Error(), "no such key") {
			t.Fatalf("XINFO CONSUMERS %s: %v", stream, err)
		}
		return cs
	}
	// A replica's consumer is named host-pid.
	ofPID := func(name string, pid int) bool { return strings.HasSuffix(name, fmt.Sprintf("-%d", pid)) }

	c.start(2)
	c.waitDelivered(100, 30*time.Second)
	var killed []int
	for i := range 6 {
		p := c.start(1)[0]
		pid := p.cmd.Process.Pid
		// On Redis 7.0 a consumer appears when it first takes an entry.
		eventually(t, 20*time.Second, fmt.Sprintf("replica %d (pid %d) holding jobs", i, pid), func() bool {
			for _, cs := range consumers(streams[1]) {
				if ofPID(cs.Name, pid) && cs.Pending > 0 {
					return true
				}
			}
			return false
		})
		p.signal(syscall.SIGKILL)
		if _, ok := p.wait(5 * time.Second); !ok {
			t.Fatalf("replica %d still running 5s after kill -9", i)
		}
		killed = append(killed, pid)
	}
	lastKill := time.Now()

	// Within the visibility timeout (the others claim the dead ones' jobs),
	// the idle limit and a clean-up round (a quarter of it, jittered): no
	// dead replica's consumer left, none idle past the limit.
	var left []string
	defer func() {
		if t.Failed() && len(left) > 0 {
			t.Logf("consumers left: %v", left)
		}
	}()
	eventually(t, 30*time.Second, "no dead replica's consumer left, none idle past the limit", func() bool {
		left = left[:0]
		for _, s := range streams {
			for _, cs := range consumers(s) {
				dead := slices.ContainsFunc(killed, func(pid int) bool { return ofPID(cs.Name, pid) })
				if dead || cs.Idle > idleLimit {
					left = append(left, fmt.Sprintf("%s idle %s pending %d", cs.Name, cs.Idle, cs.Pending))
				}
			}
		}
		return len(left) == 0
	})
	t.Logf("6 dead consumers gone %s after the last kill (visibility timeout 2s, idle limit %s)",
		time.Since(lastKill).Round(100*time.Millisecond), idleLimit)
	if got := len(consumers(streams[1])); got != 2 {
		t.Errorf("default lane's group holds %d consumers, want the 2 live replicas'", got)
	}
	if c.delivered() >= jobs {
		t.Fatal("the run ended before the check: the live replicas may have been removed as idle too")
	}
	// status shows the count in its CONSUMERS column.
	st := c.admin("status")
	row := regexp.MustCompile(`(?m)^default\s+\d+\s+\d+\s+\d+\s+\S+\s+(\S+)\s*$`).FindStringSubmatch(st)
	if !strings.Contains(st, "CONSUMERS") || row == nil || row[1] != "2" {
		t.Errorf("status: want a CONSUMERS column with 2 for the default lane:\n%s", st)
	}
}

// JetStream keeps nothing per replica: the lane consumers are durable and
// shared, and a replica's only traces there, its waiting pull requests,
// go when it dies (each expires within 5s at most). Two of three replicas
// are killed with kill -9.
func TestLiveNATSKeepsNothingPerReplica(t *testing.T) {
	c := newCluster(t, "nats", 200, "SLUICE_QUEUE_VISIBILITY_TIMEOUT=2s")
	c.enqueue("nk", "bob", 8000)
	procs := c.start(3)
	c.waitDelivered(200, 30*time.Second)
	ctx := context.Background()
	js, err := jetstream.New(c.nats.Conn())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "SLUICE_"+c.name)
	if err != nil {
		t.Fatal(err)
	}
	waiting := func() int {
		info, err := stream.Consumer(ctx, "lane_vip")
		if err != nil {
			t.Fatalf("consumer lane_vip: %v", err)
		}
		ci, err := info.Info(ctx)
		if err != nil {
			t.Fatalf("consumer lane_vip info: %v", err)
		}
		return ci.NumWaiting
	}
	consumerNames := func() []string {
		var names []string
		l := stream.ConsumerNames(ctx)
		for n := range l.Name() {
			names = append(names, n)
		}
		if err := l.Err(); err != nil {
			t.Fatalf("consumer names: %v", err)
		}
		slices.Sort(names)
		return names
	}
	want := []string{"delayed", "lane_default", "lane_vip"}
	if got := consumerNames(); !slices.Equal(got, want) {
		t.Errorf("consumers with 3 replicas: %v, want %v", got, want)
	}
	// The vip lane is empty: each replica keeps a pull request waiting on it.
	eventually(t, 15*time.Second, "3 pull requests waiting on the empty vip lane", func() bool { return waiting() == 3 })
	for _, p := range procs[:2] {
		p.signal(syscall.SIGKILL)
		if _, ok := p.wait(5 * time.Second); !ok {
			t.Fatal("replica still running 5s after kill -9")
		}
	}
	killed := time.Now()
	eventually(t, 15*time.Second, "only the live replica's pull request waiting", func() bool { return waiting() <= 1 })
	t.Logf("dead replicas' pull requests gone %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	if got := consumerNames(); !slices.Equal(got, want) {
		t.Errorf("consumers after the kills: %v, want %v", got, want)
	}
}
