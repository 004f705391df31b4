package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// perfHop measures the queue's own part of the latency: 500 jobs offered
// at 200/s, each from its enqueue to the return of a fetch that was
// waiting for it (BLPOP for the baseline, the backend's Fetch for sluice),
// with no pacer, no HTTP and no dispatcher. It returns p50 and p99.
func perfHop(t *testing.T, backend string) (hop [2]time.Duration) {
	const offered, jobs = 200, 500
	t.Run("hop-"+backend, func(t *testing.T) {
		c := newPerfCluster(t, backend, 500)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan time.Duration, jobs)
		errc := make(chan error, 1)
		go func() { errc <- c.fetchEach(ctx, jobs, got) }()
		tick := time.NewTicker(time.Second / offered)
		defer tick.Stop()
		for i := range jobs {
			<-tick.C
			if err := c.enqueueOne(fmt.Sprintf("h-%05d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		close(got)
		var waits []time.Duration
		for d := range got {
			waits = append(waits, d)
		}
		slices.Sort(waits)
		hop = [2]time.Duration{mockprovider.Percentile(waits, 50), mockprovider.Percentile(waits, 99)}
	})
	return hop
}

// fetchEach fetches n jobs one at a time, each fetch waiting for the next
// job, and sends each job's time from its enqueue to the fetch's return.
func (c *perfCluster) fetchEach(ctx context.Context, n int, got chan<- time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for range n {
		if c.list != "" {
			kv, err := c.rdb.BLPop(wctx, 0, c.list).Result()
			if err != nil {
				return fmt.Errorf("hop: blpop: %w", err)
			}
			at := time.Now()
			var j baselineJob
			if err := json.Unmarshal([]byte(kv[1]), &j); err != nil {
				return fmt.Errorf("hop: %w", err)
			}
			got <- at.Sub(j.EnqueuedAt)
			continue
		}
		ds, err := c.q.Fetch(wctx, "default", 1)
		if err != nil {
			return fmt.Errorf("hop: fetch: %w", err)
		}
		at := time.Now()
		for _, d := range ds {
			got <- at.Sub(d.Job().EnqueuedAt)
			if err := d.Ack(wctx); err != nil {
				return fmt.Errorf("hop: ack: %w", err)
			}
		}
	}
	return nil
}
