package redisq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
)

// Fetch implements queue.Consumer. Each round runs fetch.lua (promote due
// jobs, claim timed-out deliveries, read new entries) and, when that gives
// nothing, blocks in XREADGROUP for at most a block slice (half a second,
// less when a due-later job falls due sooner or ctx's deadline is nearer),
// which an enqueue from any replica ends at once. Within takeEvery of the
// lane's last round of fetch.lua, a round goes straight to the blocking
// read, which returns at once what the lane holds.
//
// go-redis does not interrupt a command when its context is cancelled (and
// with ContextTimeoutEnabled it would drop a reply that arrives after the
// deadline, leaving the read entries pending until the visibility timeout),
// so commands that take entries are sent with a context that does not
// cancel, and ctx is checked between rounds: a cancelled Fetch returns
// within one block slice. n below 1 is taken as 1.
func (q *Queue) Fetch(ctx context.Context, lane string, n int) ([]queue.Delivery, error) {
	if !slices.Contains(q.cfg.Lanes, lane) {
		return nil, fmt.Errorf("redisq: fetch: %w: %q", queue.ErrUnknownLane, lane)
	}
	n = max(n, 1)
	if err := q.startFetch(); err != nil {
		return nil, fmt.Errorf("redisq: fetch: %w", err)
	}
	defer q.fetches.Done()
	for {
		if err := q.live(ctx); err != nil {
			return nil, q.fetchErr(ctx, err)
		}
		next, fresh := q.took(lane)
		if !fresh {
			ds, due, err := q.take(lane, n)
			if err == nil {
				q.noteTake(lane, due)
			}
			if isNoGroup(err) {
				err = q.ensureGroup(ctx, lane)
			}
			if err != nil || len(ds) > 0 {
				return ds, q.fetchErr(ctx, err)
			}
			next = due
		}
		slice := q.slice(ctx, next)
		if slice <= 0 {
			continue
		}
		ds, err := q.block(lane, n, slice)
		if isNoGroup(err) {
			err = q.ensureGroup(ctx, lane)
		}
		if err != nil || len(ds) > 0 {
			return ds, q.fetchErr(ctx, err)
		}
	}
}

// fetchErr wraps a Fetch error: queue.ErrClosed after Close, else ctx's
// error (unwrapped, as the contract says) when ctx ended.
func (q *Queue) fetchErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if q.live(context.Background()) != nil {
		return fmt.Errorf("redisq: fetch: %w", queue.ErrClosed)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return fmt.Errorf("redisq: fetch: %w", err)
}

// slice returns how long the next blocking read may wait: a block slice, cut
// to the next due-later job (next, -1 when none) and to ctx's deadline. Zero
// means do not block.
func (q *Queue) slice(ctx context.Context, next time.Duration) time.Duration {
	d := blockSlice
	if next >= 0 {
		d = min(d, next)
	}
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(deadline))
	}
	if d <= 0 {
		return 0
	}
	return max(d, time.Millisecond) // a block of 0 would wait forever
}

// takeEvery is how long after a round of fetch.lua a Fetch of the same
// lane goes straight to its blocking read, which returns at once what the
// lane holds. An idle replica's Fetch returns the job its blocking read
// brought, and the next Fetch would run fetch.lua again before it blocks:
// one more script per job, which found nothing to promote or claim 99
// times in 100; a replica draining a backlog would run it on every fetch,
// where a plain read costs Redis less. Due-later jobs that round saw are
// still promoted when they fall due (the read ends then); one enqueued
// since is seen when the read ends, within a block slice, as one enqueued
// during a blocking read always was; timed-out deliveries are claimed at
// most takeEvery later than they were.
const takeEvery = 50 * time.Millisecond

// laneTake is when fetch.lua last ran for a lane, and when the lane's next
// due-later job falls due as it saw it (zero: none).
type laneTake struct {
	at, due time.Time
}

// took returns how long until the lane's next due-later job falls due (-1:
// none) as the lane's last round of fetch.lua saw it, and whether that
// round is fresh enough for a Fetch to skip the next: less than
// q.takeEvery old, and no due-later job due by now.
func (q *Queue) took(lane string) (time.Duration, bool) {
	q.takesMu.Lock()
	lt, ok := q.takes[lane]
	q.takesMu.Unlock()
	if !ok {
		return -1, false
	}
	now := time.Now()
	if now.Sub(lt.at) >= q.takeEvery {
		return -1, false
	}
	if lt.due.IsZero() {
		return -1, true
	}
	next := lt.due.Sub(now)
	return next, next > 0
}

// noteTake records a round of fetch.lua on lane, next being how long
// until its next due-later job falls due (-1: none).
func (q *Queue) noteTake(lane string, next time.Duration) {
	lt := laneTake{at: time.Now()}
	if next >= 0 {
		lt.due = lt.at.Add(next)
	}
	q.takesMu.Lock()
	q.takes[lane] = lt
	q.takesMu.Unlock()
}

// take runs fetch.lua for lane. It returns the deliveries and how long until
// the lane's next due-later job is due (-1 when none).
func (q *Queue) take(lane string, n int) ([]queue.Delivery, time.Duration, error) {
	keys := []string{q.keys.lane(lane), q.keys.delayed(lane), q.keys.dead(), q.keys.deadIndex(), q.keys.claimCursor(lane),
		q.keys.claimRest(lane)}
	ctx := context.Background() // the reply must be read: see Fetch
	v, err := q.scripts.fetch.Run(ctx, q.client, keys, group, q.cfg.Consumer, n,
		q.cfg.VisibilityTimeout.Milliseconds(), q.cfg.MaxAttempts, lane, promoteLimit, q.scanRest().Milliseconds()).Result()
	if err != nil {
		return nil, 0, err
	}
	r := newReply(v, 1, 4)
	next := r.int(0)
	var ds []queue.Delivery
	for i := 1; i+3 < r.len() && r.err == nil; i += 4 {
		d := q.delivery(lane, r.str(i), r.int(i+1), r.int(i+2), r.str(i+3))
		if d != nil {
			ds = append(ds, d)
		}
	}
	if r.err != nil {
		return ds, 0, r.err
	}
	if next < 0 {
		return ds, -1, nil
	}
	return ds, time.Duration(next) * time.Millisecond, nil
}

// block waits up to d for new entries of lane with XREADGROUP BLOCK, with
// a rider behind it when WithRider gives one.
func (q *Queue) block(lane string, n int, d time.Duration) ([]queue.Delivery, error) {
	args := &redis.XReadGroupArgs{
		Group:    group,
		Consumer: q.cfg.Consumer,
		Streams:  []string{q.keys.lane(lane), ">"},
		Count:    int64(n),
		Block:    d,
	}
	var streams []redis.XStream
	var err error
	if r := q.rider(d); r != nil {
		streams, err = q.blockRiding(args, r)
	} else {
		ctx := context.Background() // the reply must be read: see Fetch
		streams, err = q.client.XReadGroup(ctx, args).Result()
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ds []queue.Delivery
	for _, s := range streams {
		for _, m := range s.Messages {
			a, _ := m.Values["a"].(string)
			attempts, _ := strconv.ParseInt(a, 10, 64) // a missing count reads as 0
			body, _ := m.Values["j"].(string)
			if d := q.delivery(lane, m.ID, attempts, 1, body); d != nil {
				ds = append(ds, d)
			}
		}
	}
	return ds, nil
}

// delivery builds the delivery of stream entry eid of lane. The job's Lane
// is the lane it was fetched from, whatever the stored job says: a dead
// letter of a lane the queue no longer has is requeued into another lane
// with its old lane in its JSON. An entry whose job cannot be decoded is
// dead-lettered at once with the reason, and nil is returned; when that
// fails, the entry comes back after the visibility timeout, and the
// failure is logged at Warn.
func (q *Queue) delivery(lane, eid string, attempts, deliveries int64, body string) *delivery {
	d := &delivery{q: q, lane: lane, entry: eid, deliveries: deliveries}
	if err := json.Unmarshal([]byte(body), &d.job); err != nil || d.job.ID == "" {
		reason := fmt.Sprintf("unreadable job in entry %s of lane %s: %v", eid, lane, err)
		d.job = queue.Job{ID: "entry-" + eid, Lane: lane, Payload: json.RawMessage(`null`)}
		d.raw = body
		if err := d.DeadLetter(context.Background(), reason); err != nil {
			q.log.Warn("redisq: could not dead-letter an unreadable entry; it comes back after the visibility timeout",
				"queue", q.cfg.Name, "lane", lane, "entry", eid, "err", err)
		}
		return nil
	}
	d.job.Lane = lane
	d.job.Attempt = int(attempts + deliveries)
	return d
}
