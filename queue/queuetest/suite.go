package queuetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// Timing of the suite. The visibility timeout is short so that redelivery
// cases finish in seconds; the bounds on eventual conditions are generous so
// that the suite holds on a slow, loaded machine.
const (
	// visibility is the Config.VisibilityTimeout of most cases.
	visibility = time.Second
	// eventually bounds every wait for something that must happen.
	eventually = 15 * time.Second
	// quiet is how long a Fetch waits when nothing must arrive.
	quiet = 400 * time.Millisecond
	// slack absorbs timer and clock granularity in "not before" checks.
	slack = 50 * time.Millisecond
)

// Lanes of every queue the suite opens, highest priority first.
const (
	laneHigh = "high"
	laneLow  = "low"
)

// maxPayload is the Config.MaxPayloadBytes of every queue the suite opens.
const maxPayload = 1024

// testCase is one subtest of the suite.
type testCase struct {
	name string
	run  func(t *testing.T, h *harness)
}

// cases lists every subtest, in the order they are started.
func cases() []testCase {
	return []testCase{
		{"FIFOAndAck", testFIFOAndAck},
		{"RoundTrip", testRoundTrip},
		{"RetryWithDelay", testRetryWithDelay},
		{"AbandonedDelivery", testAbandonedDelivery},
		{"MaxAttemptsByRetry", testMaxAttemptsByRetry},
		{"MaxAttemptsByTimeout", testMaxAttemptsByTimeout},
		{"DeadLetterAndRequeueAll", testDeadLetterAndRequeueAll},
		{"Dedup", testDedup},
		{"NotBefore", testNotBefore},
		{"ConcurrentConsumers", testConcurrentConsumers},
		{"FetchCancel", testFetchCancel},
		{"FetchWakesOnEnqueue", testFetchWakesOnEnqueue},
		{"InvalidJobs", testInvalidJobs},
		{"Extend", testExtend},
		{"SettleTwice", testSettleTwice},
		{"ReleaseSpendsNoAttempt", testReleaseSpendsNoAttempt},
		{"Stats", testStats},
		{"UnknownLane", testUnknownLane},
		{"Close", testClose},
		{"LocateAndCancel", testLocateAndCancel},
	}
}

// Run runs the conformance suite against the backend that newQueue opens.
// Every subtest runs in parallel with the others on its own queue name
// ("qt-<subtest>-<random>"), so the backend's server must be shared safely
// by several queues. feat relaxes the checks a backend cannot pass.
func Run(t *testing.T, newQueue Factory, feat Features) {
	t.Helper()
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, &harness{t: t, newQueue: newQueue, feat: feat, name: queueName(c.name)})
		})
	}
}

// queueName returns a queue name unique to one run of one subtest.
func queueName(subtest string) string {
	name := fmt.Sprintf("qt-%s-%08x", strings.ToLower(subtest), rand.Uint32())
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	return name
}

// harness opens queues of one subtest: all share the queue name, each has
// its own consumer name.
type harness struct {
	t        *testing.T
	newQueue Factory
	feat     Features
	name     string
	opened   int
}

// config returns the configuration of the subtest's queues.
func (h *harness) config() queue.Config {
	return queue.Config{
		Name:              h.name,
		Lanes:             []string{laneHigh, laneLow},
		VisibilityTimeout: visibility,
		MaxAttempts:       3,
		DedupWindow:       time.Minute,
		MaxPayloadBytes:   maxPayload,
	}
}

// open opens a queue (a replica) with the default configuration.
func (h *harness) open() queue.Queue { return h.openWith(nil) }

// openWith opens a queue whose configuration is changed by edit first.
func (h *harness) openWith(edit func(*queue.Config)) queue.Queue {
	h.t.Helper()
	cfg := h.config()
	if edit != nil {
		edit(&cfg)
	}
	h.opened++
	cfg.Consumer = fmt.Sprintf("%s-c%d", h.name, h.opened)
	q := h.newQueue(h.t, cfg)
	if q == nil {
		h.t.Fatalf("factory returned a nil queue for %s", cfg.Name)
	}
	return q
}

// newJob returns a valid job for lane whose payload carries n.
func newJob(lane string, n int) *queue.Job {
	return &queue.Job{Lane: lane, Payload: fmt.Appendf(nil, `{"n": %d}`, n)}
}

// enqueue enqueues jobs and fails the test on error or a short result.
func enqueue(t *testing.T, q queue.Queue, jobs ...*queue.Job) []queue.EnqueueResult {
	t.Helper()
	res, err := q.Enqueue(t.Context(), jobs...)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if len(res) != len(jobs) {
		t.Fatalf("Enqueue returned %d results for %d jobs", len(res), len(jobs))
	}
	return res
}

// fetchN fetches from lane until it holds n deliveries, failing the test
// when they do not all arrive within `eventually` or more arrive.
func fetchN(t *testing.T, q queue.Queue, lane string, n int) []queue.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), eventually)
	defer cancel()
	var got []queue.Delivery
	for len(got) < n {
		ds, err := q.Fetch(ctx, lane, n-len(got))
		if err != nil {
			t.Fatalf("Fetch(%s): got %d of %d deliveries, then %v", lane, len(got), n, err)
		}
		if len(got)+len(ds) > n {
			t.Fatalf("Fetch(%s, %d) returned %d deliveries", lane, n-len(got), len(ds))
		}
		got = append(got, ds...)
	}
	return got
}

// fetchOne fetches exactly one delivery from lane.
func fetchOne(t *testing.T, q queue.Queue, lane string) queue.Delivery {
	t.Helper()
	return fetchN(t, q, lane, 1)[0]
}

// expectNone checks that a Fetch on lane gets nothing within d and ends with
// the context's deadline.
func expectNone(t *testing.T, q queue.Queue, lane string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	ds, err := q.Fetch(ctx, lane, 10)
	if len(ds) > 0 {
		t.Fatalf("Fetch(%s) within %s: got %d deliveries (first %s, attempt %d), want none",
			lane, d, len(ds), ds[0].Job().ID, ds[0].Job().Attempt)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch(%s) on a quiet lane: got error %v, want context.DeadlineExceeded", lane, err)
	}
}

// waitFor polls check until it returns "" and fails the test with check's
// last message when `eventually` passes first.
func waitFor(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(eventually)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, eventually, msg)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: test ended: %s", what, msg)
		case <-tick.C:
		}
	}
}

// laneStats returns the stats of lane, failing the test when absent.
func laneStats(t *testing.T, q queue.Queue, lane string) (queue.LaneStats, queue.Stats) {
	t.Helper()
	st, err := q.Stats(t.Context())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	i := slices.IndexFunc(st.Lanes, func(l queue.LaneStats) bool { return l.Lane == lane })
	if i < 0 {
		t.Fatalf("Stats: no lane %q in %+v", lane, st.Lanes)
	}
	return st.Lanes[i], st
}

// waitCounts waits until lane shows the given ready, delayed and in-flight
// counts.
func waitCounts(t *testing.T, q queue.Queue, lane string, ready, delayed, inFlight int64) {
	t.Helper()
	waitFor(t, "stats of "+lane, func() string {
		ls, _ := laneStats(t, q, lane)
		if ls.Ready != ready || ls.Delayed != delayed || ls.InFlight != inFlight {
			return fmt.Sprintf("got ready=%d delayed=%d in_flight=%d, want %d %d %d",
				ls.Ready, ls.Delayed, ls.InFlight, ready, delayed, inFlight)
		}
		return ""
	})
}

// payloadN returns the n carried by a payload made by newJob.
func payloadN(t *testing.T, j *queue.Job) int {
	t.Helper()
	var v struct{ N int }
	if err := json.Unmarshal(j.Payload, &v); err != nil {
		t.Fatalf("job %s: payload %q: %v", j.ID, j.Payload, err)
	}
	return v.N
}
