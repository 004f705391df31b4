package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// callTimes is Redis's own time per call of the commands an idle job
// costs, p50 by command (a script by its file name), from SLOWLOG.
type callTimes map[string]time.Duration

// perfCallJobs is how many jobs perfCallTimes offers, at 200/s.
const perfCallJobs = 300

// perfCallTimes offers perfCallJobs more jobs at 200/s to the running
// cluster c with Redis logging every command (SLOWLOG with a threshold of
// 0, then the server's settings back), and returns the p50 of Redis's own
// time per call of each command. It runs after the latency row's measured
// jobs, so that logging does not slow those. Commands run inside scripts
// are logged too and counted under their own names.
func perfCallTimes(t *testing.T, c *perfCluster) callTimes {
	t.Helper()
	ctx := context.Background()
	old, err := c.rdb.ConfigGet(ctx, "slowlog-*").Result()
	if err != nil {
		t.Fatal(err)
	}
	set := func(kv map[string]string) {
		for k, v := range kv {
			if err := c.rdb.ConfigSet(ctx, k, v).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	set(map[string]string{"slowlog-log-slower-than": "0", "slowlog-max-len": "100000"})
	defer set(old)
	if err := c.rdb.SlowLogReset(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before := c.delivered()
	tick := time.NewTicker(time.Second / 200)
	defer tick.Stop()
	for i := range perfCallJobs {
		<-tick.C
		if err := c.enqueueOne(fmt.Sprintf("s-%05d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.waitDelivered(before+perfCallJobs, time.Minute)
	logs, err := c.rdb.SlowLogGet(ctx, 100000).Result()
	if err != nil {
		t.Fatal(err)
	}
	return callTimesOf(t, logs)
}

// callTimesOf groups SLOWLOG entries by command, naming an EVALSHA by the
// script of this repository whose SHA1 it calls, and returns each group's
// p50 duration.
func callTimesOf(t *testing.T, logs []redis.SlowLog) callTimes {
	t.Helper()
	scripts := scriptSHAs(t, "pacer", "queue/redisq")
	by := map[string][]time.Duration{}
	for _, l := range logs {
		if len(l.Args) == 0 {
			continue
		}
		name := strings.ToLower(l.Args[0])
		if (name == "evalsha" || name == "evalsha_ro") && len(l.Args) > 1 {
			if s, ok := scripts[strings.ToLower(l.Args[1])]; ok {
				name = s
			}
		}
		by[name] = append(by[name], l.Duration)
	}
	out := callTimes{}
	for name, ds := range by {
		slices.Sort(ds)
		out[name] = ds[len(ds)/2]
	}
	return out
}

// text is "name 12µs · …" for the given commands that were logged.
func (ct callTimes) text(names ...string) string {
	var parts []string
	for _, n := range names {
		if d, ok := ct[n]; ok {
			parts = append(parts, fmt.Sprintf("%s %dµs", n, d.Microseconds()))
		}
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, " · ")
}
