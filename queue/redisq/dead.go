package redisq

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
)

// requeueChunk bounds the dead letters requeued by one script call.
const requeueChunk = 100

// ListDead implements queue.DeadLetters, reading the dead-letter stream
// from its oldest entry. Each dead letter's Job has Attempt set to the
// attempts made and LastError to the reason. A limit below 1 means 100.
func (q *Queue) ListDead(ctx context.Context, limit int) ([]queue.DeadLetter, error) {
	if limit < 1 {
		limit = defaultListLimit
	}
	msgs, err := q.client.XRangeN(ctx, q.keys.dead(), "-", "+", int64(limit)).Result()
	if err != nil {
		return nil, fmt.Errorf("redisq: list dead: %w", err)
	}
	out := make([]queue.DeadLetter, len(msgs))
	for i, m := range msgs {
		out[i] = deadLetter(m)
	}
	return out, nil
}

// deadLetter decodes one dead-letter entry. A job that cannot be decoded
// (it was dead-lettered as unreadable) keeps its id and lane, and its stored
// text as a JSON string payload.
func deadLetter(m redis.XMessage) queue.DeadLetter {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	dl := queue.DeadLetter{Reason: str("r"), At: entryTime(m.ID)}
	if err := json.Unmarshal([]byte(str("j")), &dl.Job); err != nil {
		raw, _ := json.Marshal(str("j"))
		dl.Job = queue.Job{ID: str("id"), Lane: str("l"), Payload: raw}
	}
	attempts, _ := strconv.Atoi(str("a")) // a missing count reads as 0
	dl.Job.Attempt = attempts
	dl.Job.LastError = dl.Reason
	return dl
}

// entryTime is the time in a stream entry id ("<ms>-<seq>").
func entryTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// Requeue implements queue.DeadLetters. With ids, they are requeued 100 per
// script call; without, the oldest 100 dead letters are requeued per call
// until none is left. A dead letter's lane that the queue no longer has is
// replaced by the last lane.
func (q *Queue) Requeue(ctx context.Context, ids ...string) (int, error) {
	if len(ids) == 0 {
		return q.requeueAll(ctx)
	}
	total := 0
	var missing []string
	for chunk := range slices.Chunk(ids, requeueChunk) {
		n, miss, err := q.requeue(ctx, "ids", chunk...)
		total += n
		missing = append(missing, miss...)
		if err != nil {
			return total, fmt.Errorf("redisq: requeue: %w", err)
		}
	}
	if len(missing) > 0 {
		return total, fmt.Errorf("redisq: requeue: %w: no dead letter for job %s",
			queue.ErrNotFound, strings.Join(missing, ", "))
	}
	return total, nil
}

// requeueAll requeues the oldest dead letters until none is left.
func (q *Queue) requeueAll(ctx context.Context) (int, error) {
	total := 0
	for {
		n, _, err := q.requeue(ctx, "oldest", strconv.Itoa(requeueChunk))
		total += n
		if err != nil {
			return total, fmt.Errorf("redisq: requeue: %w", err)
		}
		if n < requeueChunk {
			return total, nil
		}
	}
}

// requeue runs requeue.lua in mode with args; it returns how many dead
// letters were requeued and the ids not found.
func (q *Queue) requeue(ctx context.Context, mode string, args ...string) (int, []string, error) {
	keys := append([]string{q.keys.dead(), q.keys.deadIndex()}, q.keys.lanes(q.cfg.Lanes)...)
	argv := make([]any, 0, 1+len(q.cfg.Lanes)+len(args))
	argv = append(argv, mode)
	for _, l := range q.cfg.Lanes {
		argv = append(argv, l)
	}
	for _, a := range args {
		argv = append(argv, a)
	}
	v, err := q.scripts.requeue.Run(ctx, q.client, keys, argv...).Result()
	if err != nil {
		return 0, nil, err
	}
	r := newReply(v, 1, 1)
	n := int(r.int(0))
	var missing []string
	for i := 1; i < r.len() && r.err == nil; i++ {
		missing = append(missing, r.str(i))
	}
	return n, missing, r.err
}
