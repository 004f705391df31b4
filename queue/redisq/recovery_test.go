package redisq_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

// TestRecoveryBehindHeldEntries: an abandoned delivery sits in the pending
// list behind 40 older deliveries that their consumer keeps alive with
// Extend. XAUTOCLAIM scans at most ten entries per job asked for, so a
// consumer fetching one job at a time must resume the scan where the last
// one stopped to reach the abandoned entry at all.
func TestRecoveryBehindHeldEntries(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	cfg := queue.Config{Name: "recovery", Lanes: []string{"only"}, VisibilityTimeout: time.Second}
	holderCfg, rescuerCfg := cfg, cfg
	holderCfg.Consumer, rescuerCfg.Consumer = "holder", "rescuer"
	holder, rescuer := open(t, srv, holderCfg), open(t, srv, rescuerCfg)

	const held = 40
	jobs := make([]*queue.Job, held+1)
	for i := range jobs {
		jobs[i] = &queue.Job{Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	res, err := holder.Enqueue(t.Context(), jobs...)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	abandoned := res[held].ID
	ds := fetchAll(t, holder, held+1)

	// Keep the first 40 alive; never touch the last one.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, d := range ds[:held] {
				if err := d.Extend(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("Extend: %v", err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { cancel(); <-done }()

	fctx, fcancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer fcancel()
	got, err := rescuer.Fetch(fctx, "only", 1)
	if err != nil {
		t.Fatalf("Fetch of the abandoned job behind %d held ones: %v", held, err)
	}
	if j := got[0].Job(); j.ID != abandoned || j.Attempt != 2 {
		t.Errorf("got job %s attempt %d, want the abandoned %s, attempt 2", j.ID, j.Attempt, abandoned)
	}
}

// fetchAll fetches exactly n jobs of lane "only" from q.
func fetchAll(t *testing.T, q queue.Queue, n int) []queue.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	var ds []queue.Delivery
	for len(ds) < n {
		got, err := q.Fetch(ctx, "only", n-len(ds))
		if err != nil {
			t.Fatalf("Fetch: %d of %d, then %v", len(ds), n, err)
		}
		ds = append(ds, got...)
	}
	return ds
}

// TestUnreadableEntryIsDeadLettered: an entry whose job cannot be decoded
// (written by something else than this package) is dead-lettered with the
// reason on its first fetch instead of blocking its lane, and the jobs
// behind it are still delivered.
func TestUnreadableEntryIsDeadLettered(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	q := open(t, srv, queue.Config{Name: "unreadable", Lanes: []string{"only"}})
	err := srv.Client().XAdd(t.Context(), &redis.XAddArgs{
		Stream: "sluice:{unreadable}:lane:only", Values: []string{"a", "0", "j", "{not json"},
	}).Err()
	if err != nil {
		t.Fatalf("XADD: %v", err)
	}
	res, err := q.Enqueue(t.Context(), &queue.Job{Payload: []byte(`{}`)})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	ds := fetchAll(t, q, 1)
	if ds[0].Job().ID != res[0].ID {
		t.Errorf("got job %s, want %s, the one behind the unreadable entry", ds[0].Job().ID, res[0].ID)
	}
	dead, err := q.ListDead(t.Context(), 10)
	if err != nil {
		t.Fatalf("ListDead: %v", err)
	}
	if len(dead) != 1 || !strings.Contains(dead[0].Reason, "unreadable job") || string(dead[0].Job.Payload) != `"{not json"` {
		t.Errorf("ListDead: got %+v, want one unreadable job keeping its text", dead)
	}
}

// TestScanRestsAfterAPass: once a scan for timed-out deliveries has passed
// over a lane's pending entries, fetches within the rest (a tenth of the
// visibility timeout, at most 1s) scan nothing: at the ceiling, a scan on
// every fetch over the same live entries was an eighth of Redis' time.
func TestScanRestsAfterAPass(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	q := open(t, srv, queue.Config{Name: "rest", Lanes: []string{"only"}, VisibilityTimeout: 10 * time.Second})
	const n = 50
	jobs := make([]*queue.Job, n)
	for i := range jobs {
		jobs[i] = &queue.Job{Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	if _, err := q.Enqueue(t.Context(), jobs...); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	warm := time.Now()
	fetchAll(t, q, 1) // makes the consumer group; its scan finds nothing pending and rests
	resting, err := rdb.Exists(t.Context(), "sluice:{rest}:claim-rest:only").Result()
	if err != nil || resting != 1 && time.Since(warm) < time.Second {
		t.Errorf("claim rest key after a pass: %d, %v; want it set while the scan rests (1s)", resting, err)
	}
	if err := rdb.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range n - 1 { // one job per fetch, each left pending
		fetchAll(t, q, 1)
	}
	elapsed := time.Since(start)
	st, err := testredis.CommandStats(t.Context(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	scans := st["xautoclaim"].Calls
	// None within the rest (1s from the warm-up's pass). On a machine
	// slow enough to take longer, one pass per rest that ended while
	// fetching, each at most 5 calls (a call scans 10 of the at most 50
	// pending entries).
	most := int64(0)
	if d := time.Since(warm); d >= time.Second {
		most = 5 * int64(d/time.Second)
	}
	if scans > most {
		t.Errorf("%d scans for %d fetches in %s, want at most %d", scans, st["evalsha"].Calls, elapsed, most)
	}
	t.Logf("%d scans for %d fetches in %s", scans, st["evalsha"].Calls, elapsed)
	// The cursor holds only entry ids, as earlier versions read it (a
	// rolling upgrade runs both): the rest is a key of its own.
	if v, err := rdb.Get(t.Context(), "sluice:{rest}:claim-cursor:only").Result(); err != redis.Nil &&
		(err != nil || !regexp.MustCompile(`^\d+-\d+$`).MatchString(v)) {
		t.Errorf("claim cursor = %q, %v; want an entry id or none", v, err)
	}
}
