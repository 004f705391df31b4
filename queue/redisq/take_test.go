package redisq

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

// Within takeEvery of the lane's last round of fetch.lua, a Fetch goes
// straight to its blocking read: twenty fetches of one job each, each job
// enqueued before its fetch, run fetch.lua once (its ZRANGEBYSCORE counts
// the rounds), and every job comes, in order, with one delivery. With
// takeEvery at zero, every fetch runs it, as before.
func TestFetchSkipsAFreshRound(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	for _, tc := range []struct {
		every  time.Duration
		rounds int64
	}{{time.Hour, 1}, {0, 20}} {
		q := openTest(t, srv, "take"+tc.every.String(), "c1")
		q.takeEvery = tc.every
		if err := q.ensureGroup(t.Context(), "default"); err != nil {
			t.Fatal(err)
		}
		if err := srv.Client().ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, err := q.Enqueue(t.Context(), &queue.Job{Lane: "default", Payload: json.RawMessage(`{}`), ID: string(rune('a' + i))}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			ds, err := q.Fetch(ctx, "default", 1)
			cancel()
			if err != nil || len(ds) != 1 {
				t.Fatalf("fetch %d: %d deliveries, %v", i, len(ds), err)
			}
			if j := ds[0].Job(); j.ID != string(rune('a'+i)) || j.Attempt != 1 {
				t.Errorf("fetch %d: job %q attempt %d, want %q attempt 1", i, j.ID, j.Attempt, string(rune('a'+i)))
			}
			if err := ds[0].Ack(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		st, err := testredis.CommandStats(t.Context(), srv.Client())
		if err != nil {
			t.Fatal(err)
		}
		if n := st["zrangebyscore"].Calls; n != tc.rounds {
			t.Errorf("takeEvery %s: fetch.lua ran %d times for 20 fetches, want %d", tc.every, n, tc.rounds)
		}
	}
}
