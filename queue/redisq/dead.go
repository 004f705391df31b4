package redisq

import (
	"context"
	"encoding/json"
	"errors"
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

// ErrUnknownLane is returned by Requeue, with WithKeepLanes, for dead
// letters whose lane is not one of the queue's lanes.
var ErrUnknownLane = errors.New("redisq: lane not in queue.lanes")

// WithKeepLanes makes Requeue leave a dead letter whose lane is not one of
// the queue's lanes where it is, and name it in an error matching
// ErrUnknownLane, instead of putting it in the last lane: for a process
// whose lanes may not be those the dispatchers read (an admin command run
// without their configuration).
func WithKeepLanes() Option { return func(q *Queue) { q.keepLanes = true } }

// Requeue implements queue.DeadLetters. With ids, they are requeued 100 per
// script call; without, the oldest 100 dead letters are requeued per call
// until none is left. A dead letter's lane that the queue does not have is
// replaced by the last lane, or, with WithKeepLanes, the dead letter is
// left and named in the error.
func (q *Queue) Requeue(ctx context.Context, ids ...string) (int, error) {
	if len(ids) == 0 {
		return q.requeueAll(ctx)
	}
	var total requeued
	for chunk := range slices.Chunk(ids, requeueChunk) {
		r, err := q.requeue(ctx, "ids", chunk...)
		total.add(r)
		if err != nil {
			return total.n, fmt.Errorf("redisq: requeue: %w", err)
		}
	}
	return total.n, q.requeueErr(total)
}

// requeueAll requeues the oldest dead letters until none is left (but
// those WithKeepLanes leaves).
func (q *Queue) requeueAll(ctx context.Context) (int, error) {
	var total requeued
	for after := "-"; ; {
		r, err := q.requeue(ctx, "oldest", strconv.Itoa(requeueChunk), after)
		total.add(r)
		if err != nil {
			return total.n, fmt.Errorf("redisq: requeue: %w", err)
		}
		if r.n+len(r.left) < requeueChunk || r.last == "" {
			return total.n, q.requeueErr(total)
		}
		after = r.last
	}
}

// requeued is what requeue.lua did.
type requeued struct {
	n       int
	last    string   // mode oldest: the last entry looked at
	missing []string // ids with no dead letter
	left    []string // "id (lane x)" of dead letters left for their lane
}

func (r *requeued) add(o requeued) {
	r.n += o.n
	r.missing = append(r.missing, o.missing...)
	r.left = append(r.left, o.left...)
}

// requeueErr names the ids not found and the dead letters left.
func (q *Queue) requeueErr(r requeued) error {
	var errs []error
	if len(r.missing) > 0 {
		errs = append(errs, fmt.Errorf("redisq: requeue: %w: no dead letter for job %s", queue.ErrNotFound, strings.Join(r.missing, ", ")))
	}
	if len(r.left) > 0 {
		errs = append(errs, fmt.Errorf("redisq: requeue: %w (%s): left as dead letters: %s", ErrUnknownLane,
			strings.Join(q.cfg.Lanes, ", "), strings.Join(r.left, ", ")))
	}
	return errors.Join(errs...)
}

// requeue runs requeue.lua in mode with args.
func (q *Queue) requeue(ctx context.Context, mode string, args ...string) (requeued, error) {
	keys := append([]string{q.keys.dead(), q.keys.deadIndex()}, q.keys.lanes(q.cfg.Lanes)...)
	unknown := "last"
	if q.keepLanes {
		unknown = "keep"
	}
	argv := make([]any, 0, 2+len(q.cfg.Lanes)+len(args))
	argv = append(argv, mode, unknown)
	for _, l := range q.cfg.Lanes {
		argv = append(argv, l)
	}
	for _, a := range args {
		argv = append(argv, a)
	}
	v, err := q.scripts.requeue.Run(ctx, q.client, keys, argv...).Result()
	if err != nil {
		return requeued{}, err
	}
	r := newReply(v, 2, 2)
	out := requeued{n: int(r.int(0)), last: r.str(1)}
	for i := 2; i+1 < r.len() && r.err == nil; i += 2 {
		if id, lane := r.str(i), r.str(i+1); lane == "" {
			out.missing = append(out.missing, id)
		} else {
			out.left = append(out.left, id+" (lane "+lane+")")
		}
	}
	return out, r.err
}
