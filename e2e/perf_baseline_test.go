package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/pacer"
)

// The baseline of the perf table: the simplest worker that moves jobs from
// Redis to the provider, with none of sluice's guarantees (no acks, so a
// crash loses the jobs it holds; no cap; no priority).

// baselineJob is a job on the baseline's Redis list.
type baselineJob struct {
	ID         string          `json:"id"`
	EnqueuedAt time.Time       `json:"enqueued_at"`
	Payload    json.RawMessage `json:"payload"`
}

// baselinePush appends jobs to list, stamped now.
func baselinePush(ctx context.Context, rdb *redis.Client, list string, ids ...string) error {
	vals := make([]any, len(ids))
	for i, id := range ids {
		b, err := json.Marshal(baselineJob{ID: id, EnqueuedAt: time.Now(), Payload: json.RawMessage(`{"text":"hi"}`)})
		if err != nil {
			return fmt.Errorf("baseline: push: %w", err)
		}
		vals[i] = b
	}
	if err := rdb.RPush(ctx, list, vals...).Err(); err != nil {
		return fmt.Errorf("baseline: push: %w", err)
	}
	return nil
}

// baselineWorkerEnv, set in the environment of this test binary, makes it
// the baseline's worker instead of running tests (TestMain): the value is
// "redis-addr list provider-url goroutines". The worker runs as a process
// of its own, as a user runs one and as the dispatchers run, so that the
// table counts its CPU apart from the provider's and the producer's.
const baselineWorkerEnv = "SLUICE_E2E_BASELINE_WORKER"

// baselineWorkerMain runs the baseline's worker as described by spec until
// its standard input closes (the test ended, or died), and returns the
// process's exit code.
func baselineWorkerMain(spec string) int {
	var addr, list, url string
	var n int
	if _, err := fmt.Sscan(spec, &addr, &list, &url, &n); err != nil {
		fmt.Fprintf(os.Stderr, "baseline worker: %s=%q: %v\n", baselineWorkerEnv, spec, err)
		return 2
	}
	// Stopping closes the client under the pops in flight, which go-redis
	// logs; the worker has nothing to say.
	redis.SetLogger(quietRedis{})
	stop := runBaseline(addr, list, url, n)
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop()
	return 0
}

// startBaselineWorker starts the baseline's worker in a process of its own
// (this test binary again, baselineWorkerEnv set) and returns its process
// id; the test's cleanup stops it.
func startBaselineWorker(t *testing.T, addr, list, url string, n int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %d", baselineWorkerEnv, addr, list, url, n))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("baseline worker: %v", err)
	}
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("baseline worker: %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Error("baseline worker: did not stop within 10s of its input closing; killed")
		}
	})
	return cmd.Process.Pid
}

// quietRedis is a go-redis logger that drops what it is given.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// runBaseline starts n goroutines that pop list (BLPOP) and POST each job
// to url, until the returned stop is called.
func runBaseline(addr, list, url string, n int) (stop func()) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: n + 2})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				kv, err := rdb.BLPop(ctx, time.Second, list).Result()
				if err != nil || len(kv) != 2 {
					continue // redis.Nil: nothing within a second
				}
				var j baselineJob
				if json.Unmarshal([]byte(kv[1]), &j) != nil {
					continue
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(j.Payload))
				if err != nil {
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(mockprovider.HeaderJobID, j.ID)
				req.Header.Set(mockprovider.HeaderEnqueuedAt, j.EnqueuedAt.Format(time.RFC3339Nano))
				if resp, err := hc.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	return func() { cancel(); wg.Wait(); hc.CloseIdleConnections(); _ = rdb.Close() }
}

// fixedWindow is the one-call-per-grant limiter the baseline pacer uses:
// INCR a per-second counter, with its expiry set on the first grant.
//
// KEYS[1] -> the window's counter
// ARGV[1] -> the window's limit
// Returns 1 when granted, else 0.
var fixedWindow = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], 1000) end
if n > tonumber(ARGV[1]) then return 0 end
return 1`)

// grantsPerSecond runs procs × callers goroutines taking grants for d,
// each process with its own Redis client, and returns grants per second.
// take is one grant through the given client.
func grantsPerSecond(addr string, procs, callers int, d time.Duration, newTaker func(rdb *redis.Client) (func(context.Context) error, error)) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var granted atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	start := time.Now()
	for range procs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: callers + 2})
		defer rdb.Close()
		take, err := newTaker(rdb)
		if err != nil {
			return 0, err
		}
		for range callers {
			wg.Go(func() {
				for {
					err := take(ctx)
					if ctx.Err() != nil {
						return
					}
					if err != nil {
						firstErr.CompareAndSwap(nil, &err)
						return
					}
					granted.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return 0, fmt.Errorf("perf: grants: %w", *p)
	}
	return float64(granted.Load()) / time.Since(start).Seconds(), nil
}

// oneCallPerGrant is the baseline's taker: one script call per grant, on a
// window never full.
func oneCallPerGrant(rdb *redis.Client) (func(context.Context) error, error) {
	return func(ctx context.Context) error {
		key := fmt.Sprintf("perf:{base}:%d", time.Now().Unix())
		return fixedWindow.Run(ctx, rdb, []string{key}, 1_000_000_000).Err()
	}, nil
}

// sluicePacer is sluice's taker: Pacer.Wait at a rate never reached.
func sluicePacer(name string) func(rdb *redis.Client) (func(context.Context) error, error) {
	return func(rdb *redis.Client) (func(context.Context) error, error) {
		p, err := pacer.New(rdb, pacer.Config{Name: name, Rate: pacer.MaxRate, Burst: 100000})
		if err != nil {
			return nil, fmt.Errorf("perf: pacer: %w", err)
		}
		return p.Wait, nil
	}
}
