package redisq

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
)

var (
	_ queue.Locator  = (*Queue)(nil)
	_ queue.Canceler = (*Queue)(nil)
)

//go:embed cancel.lua
var cancelLua string

// cancelScript is cancel.lua, wrapped once.
var cancelScript = redis.NewScript(cancelLua)

// scanPage is how many stream entries or set members one lookup call reads.
const scanPage = 500

// found is where a lookup found a job: its state and what removes it.
type found struct {
	loc    queue.Location
	stream string // the lane stream or dead stream holding it
	entry  string // its entry id there
	member string // its member in a due-later set
	set    string // that set
}

// Locate implements queue.Locator. It reads the dead-letter index, then
// each lane's due-later set (ZSCAN) and stream (XRANGE, 500 entries per
// call), in pages, so that Redis is never held for long whatever the
// backlog; a lookup costs about one round trip per 500 jobs waiting. A job
// not found on the first pass is looked for again in the due-later sets and
// the dead letters, where a retry or a dead-lettering during the pass
// moves it.
func (q *Queue) Locate(ctx context.Context, id string) (queue.Location, error) {
	f, err := q.find(ctx, id)
	if err != nil {
		return queue.Location{}, fmt.Errorf("redisq: locate %s: %w", id, err)
	}
	return f.loc, nil
}

// Cancel implements queue.Canceler: a waiting job's stream entry is
// deleted (by a script that checks that no consumer holds it), a dead
// letter deleted, and a job in a due-later set has its member removed by
// one ZREM. That is a delayed job, or one already due that no fetch has
// moved into its lane yet, which is waiting and is cancelled as such. A
// job that moves while it is being cancelled (a fetch promotes it, say)
// is looked for once more.
func (q *Queue) Cancel(ctx context.Context, id string) (queue.State, error) {
	for range 2 {
		f, err := q.find(ctx, id)
		if err != nil {
			return "", fmt.Errorf("redisq: cancel %s: %w", id, err)
		}
		var n int64
		switch {
		case f.loc.State == queue.StateUnknown:
			return f.loc.State, fmt.Errorf("redisq: cancel %s: %w", id, queue.ErrNotFound)
		case f.loc.State == queue.StateInFlight:
			return f.loc.State, fmt.Errorf("redisq: cancel %s: %w", id, queue.ErrInFlight)
		case f.set != "": // delayed, or due and not yet promoted: waiting
			n, err = q.client.ZRem(ctx, f.set, f.member).Result()
		case f.loc.State == queue.StateWaiting:
			n, err = cancelScript.Run(ctx, q.client, []string{f.stream}, "entry", f.entry, id, group).Int64()
		case f.loc.State == queue.StateDead:
			n, err = cancelScript.Run(ctx, q.client, []string{f.stream, q.keys.deadIndex()}, "dead", f.entry, id).Int64()
		}
		switch {
		case err != nil:
			return "", fmt.Errorf("redisq: cancel %s: %w", id, err)
		case n == 1:
			return f.loc.State, nil
		case n == 2:
			return queue.StateInFlight, fmt.Errorf("redisq: cancel %s: %w", id, queue.ErrInFlight)
		}
	}
	return queue.StateUnknown, fmt.Errorf("redisq: cancel %s: %w: it moved twice while being cancelled", id, queue.ErrNotFound)
}

// find looks for the job with id, as Locate says.
func (q *Queue) find(ctx context.Context, id string) (found, error) {
	if f, ok, err := q.findDead(ctx, id); err != nil || ok {
		return f, err
	}
	if f, ok, err := q.findDelayed(ctx, id); err != nil || ok {
		return f, err
	}
	for _, lane := range q.cfg.Lanes {
		if f, ok, err := q.findInStream(ctx, lane, id); err != nil || ok {
			return f, err
		}
	}
	if f, ok, err := q.findDelayed(ctx, id); err != nil || ok {
		return f, err
	}
	if f, ok, err := q.findDead(ctx, id); err != nil || ok {
		return f, err
	}
	return found{loc: queue.Location{State: queue.StateUnknown}}, nil
}

func (q *Queue) findDead(ctx context.Context, id string) (found, bool, error) {
	did, err := q.client.HGet(ctx, q.keys.deadIndex(), id).Result()
	if errors.Is(err, redis.Nil) {
		return found{}, false, nil
	}
	if err != nil {
		return found{}, false, err
	}
	msgs, err := q.client.XRange(ctx, q.keys.dead(), did, did).Result()
	if err != nil || len(msgs) == 0 {
		return found{}, false, err
	}
	dl := deadLetter(msgs[0])
	return found{loc: queue.Location{State: queue.StateDead, Job: &dl.Job, Reason: dl.Reason},
		stream: q.keys.dead(), entry: did}, true, nil
}

// findDelayed scans each lane's due-later set for the job's member,
// "<token>:<attempts>:<len(id)>:<id><job JSON>". A member already due
// (promoted at the next fetch) is waiting; either way set and member say
// what Cancel removes, and stream and entry are empty.
func (q *Queue) findDelayed(ctx context.Context, id string) (found, bool, error) {
	match := "*:" + strconv.Itoa(len(id)) + ":" + globEscape(id) + "{*"
	now, err := q.client.Time(ctx).Result()
	if err != nil {
		return found{}, false, err
	}
	for _, lane := range q.cfg.Lanes {
		set := q.keys.delayed(lane)
		var cursor uint64
		for {
			kv, next, err := q.client.ZScan(ctx, set, cursor, match, scanPage).Result()
			if err != nil {
				return found{}, false, err
			}
			for i := 0; i+1 < len(kv); i += 2 {
				j, ok := delayedJob(kv[i], id)
				if !ok {
					continue
				}
				st := queue.StateDelayed
				if due, err := strconv.ParseFloat(kv[i+1], 64); err == nil && int64(due) <= now.UnixMilli() {
					st = queue.StateWaiting
				}
				return found{loc: queue.Location{State: st, Job: j}, set: set, member: kv[i]}, true, nil
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return found{}, false, nil
}

// delayedJob decodes a due-later member when it holds the job with id.
func delayedJob(member, id string) (*queue.Job, bool) {
	parts := strings.SplitN(member, ":", 4)
	if len(parts) != 4 || !strings.HasPrefix(parts[3], id) || parts[2] != strconv.Itoa(len(id)) {
		return nil, false
	}
	var j queue.Job
	if json.Unmarshal([]byte(parts[3][len(id):]), &j) != nil {
		return nil, false
	}
	j.Attempt, _ = strconv.Atoi(parts[1])
	return &j, true
}

// findInStream pages through a lane's stream for an entry holding id; an
// entry a consumer holds (pending) is in flight.
func (q *Queue) findInStream(ctx context.Context, lane, id string) (found, bool, error) {
	stream := q.keys.lane(lane)
	start := "-"
	for {
		msgs, err := q.client.XRangeN(ctx, stream, start, "+", scanPage).Result()
		if err != nil {
			return found{}, false, err
		}
		for _, m := range msgs {
			if s, _ := m.Values["id"].(string); s != id {
				continue
			}
			f := found{stream: stream, entry: m.ID, loc: queue.Location{State: queue.StateWaiting}}
			if body, _ := m.Values["j"].(string); body != "" {
				var j queue.Job
				if json.Unmarshal([]byte(body), &j) == nil {
					j.Attempt, _ = strconv.Atoi(fmt.Sprint(m.Values["a"]))
					f.loc.Job = &j
				}
			}
			pending, err := q.client.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: group,
				Start: m.ID, End: m.ID, Count: 1}).Result()
			if err != nil && !isNoGroup(err) {
				return found{}, false, err
			}
			if len(pending) > 0 {
				f.loc.State = queue.StateInFlight
			}
			return f, true, nil
		}
		if len(msgs) < scanPage {
			return found{}, false, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// globEscape escapes the characters that a Redis MATCH pattern treats
// specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
