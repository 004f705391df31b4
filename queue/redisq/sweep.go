package redisq

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Clean-up of the consumers that replicas which died left in the groups.
const (
	// maxSweepEvery bounds the time between two clean-ups of a queue.
	maxSweepEvery = 30 * time.Second
	// sweepTimeout bounds one clean-up.
	sweepTimeout = 5 * time.Second
)

// LaneConsumer is one consumer of one lane's group.
type LaneConsumer struct {
	Lane     string
	Consumer string
}

// Sweep removes from every lane's group the consumers that hold no job and
// have been idle for at least Config.ConsumerIdleLimit, except this
// queue's own consumer, and returns those removed. Each lane's check and
// removal run in one script, so a consumer that has just taken a job is
// kept. A consumer's idle time restarts whenever it reads, claims or
// extends an entry, so the consumer of a live replica that holds or takes
// jobs is idle for at most about a third of the visibility timeout. One
// removed while its replica lives (on a lane without jobs, before Redis
// 7.2 where an empty read does not count, or cut off from Redis for longer
// than the limit) held nothing, and its replica's next read adds it again.
//
// A Queue that fetches calls Sweep by itself, every quarter of the limit
// (at most every 30s, jittered), from its first Fetch until Close; with a
// negative ConsumerIdleLimit it never does, and Sweep removes nothing.
func (q *Queue) Sweep(ctx context.Context) ([]LaneConsumer, error) {
	limit := q.cfg.ConsumerIdleLimit
	if limit < 0 {
		return nil, nil
	}
	v, err := q.scripts.sweep.Run(ctx, q.client, q.keys.lanes(q.cfg.Lanes), group, q.cfg.Consumer, limit.Milliseconds()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisq: sweep: %w", err)
	}
	r := newReply(v, 0, 2)
	var out []LaneConsumer
	for i := 0; i+1 < r.len() && r.err == nil; i += 2 {
		lane := int(r.int(i)) - 1
		if lane < 0 || lane >= len(q.cfg.Lanes) {
			return out, fmt.Errorf("redisq: sweep: %w: lane index %d of %d lanes", errReply, lane+1, len(q.cfg.Lanes))
		}
		out = append(out, LaneConsumer{Lane: q.cfg.Lanes[lane], Consumer: r.str(i + 1)})
	}
	if r.err != nil {
		return out, fmt.Errorf("redisq: sweep: %w", r.err)
	}
	return out, nil
}

// sweepEvery is the time to the next clean-up: a quarter of the limit, at
// most maxSweepEvery, times a uniform draw from [0.75, 1.25) so that
// replicas started together do not sweep together.
func (q *Queue) sweepEvery() time.Duration {
	d := min(q.cfg.ConsumerIdleLimit/4, maxSweepEvery)
	return time.Duration(float64(d) * (0.75 + rand.Float64()/2))
}

// sweepLoop calls Sweep every sweepEvery until Close. Failures are logged
// once until a clean-up succeeds again; the next round tries again.
func (q *Queue) sweepLoop() {
	defer q.bg.Done()
	failing := false
	for {
		t := time.NewTimer(q.sweepEvery())
		select {
		case <-q.closed:
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
		removed, err := q.Sweep(ctx)
		cancel()
		switch {
		case err != nil && !failing:
			failing = true
			q.log.Warn("redisq: could not remove idle consumers; trying again later", "queue", q.cfg.Name, "err", err)
		case err == nil:
			failing = false
		}
		if len(removed) > 0 {
			q.log.Info("redisq: removed idle consumers (replicas gone)", "queue", q.cfg.Name,
				"idle_limit", q.cfg.ConsumerIdleLimit, "consumers", names(removed))
		}
	}
}

// names lists removed consumers as lane/consumer.
func names(cs []LaneConsumer) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.Lane + "/" + c.Consumer
	}
	return strings.Join(s, " ")
}

// Consumers returns how many consumers each lane's group holds, by lane:
// the live replicas' and those not yet removed by Sweep. A lane whose group
// does not exist yet has none.
func (q *Queue) Consumers(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64, len(q.cfg.Lanes))
	for _, lane := range q.cfg.Lanes {
		groups, err := q.client.XInfoGroups(ctx, q.keys.lane(lane)).Result()
		if err != nil && !strings.Contains(err.Error(), "no such key") {
			return nil, fmt.Errorf("redisq: consumers of lane %s: %w", lane, err)
		}
		out[lane] = 0
		for _, g := range groups {
			if g.Name == group {
				out[lane] = g.Consumers
			}
		}
	}
	return out, nil
}
