package natsq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sluicehq/sluice/queue"
)

// Stats implements queue.Inspector with 2 + 2×lanes requests:
//
//   - Ready is the lane consumer's NumPending: messages never delivered.
//     A message waiting to be delivered again (after a visibility timeout)
//     is still counted in InFlight, JetStream's NumAckPending, until a
//     consumer fetches it.
//   - Delayed is the count of the lane's delayed subject (stream info with a
//     subject filter): jobs with a future NotBefore or a retry delay, and
//     due ones the mover has not moved yet.
//   - OldestAge is now minus EnqueuedAt of the lane's first undelivered
//     message (a message get by subject from the consumer's delivered
//     sequence), so a retried job counts from its first enqueue.
//   - DeadLetters is the message count of the dead letter stream.
func (q *Queue) Stats(ctx context.Context) (queue.Stats, error) {
	if q.closed() {
		return queue.Stats{}, fmt.Errorf("natsq: stats: %w", queue.ErrClosed)
	}
	info, err := q.stream.Info(ctx, jetstream.WithSubjectFilter(q.n.delayedAll()))
	if err != nil {
		return queue.Stats{}, fmt.Errorf("natsq: stats: %w", err)
	}
	st := queue.Stats{Lanes: make([]queue.LaneStats, 0, len(q.cfg.Lanes))}
	for _, lane := range q.cfg.Lanes {
		ls, err := q.laneStats(ctx, lane)
		if err != nil {
			return queue.Stats{}, fmt.Errorf("natsq: stats of lane %s: %w", lane, err)
		}
		ls.Delayed = int64(info.State.Subjects[q.n.delayed(lane)])
		st.Lanes = append(st.Lanes, ls)
	}
	dead, err := q.dead.Info(ctx)
	if err != nil {
		return queue.Stats{}, fmt.Errorf("natsq: stats: %w", err)
	}
	st.DeadLetters = int64(dead.State.Msgs)
	return st, nil
}

// laneStats reads the counts of one lane's consumer and its oldest ready job.
func (q *Queue) laneStats(ctx context.Context, lane string) (queue.LaneStats, error) {
	ci, err := q.lanes[lane].Info(ctx)
	if err != nil {
		return queue.LaneStats{}, err
	}
	ls := queue.LaneStats{Lane: lane, Ready: int64(ci.NumPending), InFlight: int64(ci.NumAckPending)}
	if ls.Ready == 0 {
		return ls, nil
	}
	m, err := q.stream.GetMsg(ctx, ci.Delivered.Stream+1, jetstream.WithGetMsgSubject(q.n.ready(lane)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return ls, nil // fetched since Info
	}
	if err != nil {
		return queue.LaneStats{}, err
	}
	var j struct {
		EnqueuedAt time.Time `json:"enqueued_at"`
	}
	if json.Unmarshal(m.Data, &j) == nil && !j.EnqueuedAt.IsZero() {
		ls.OldestAge = max(q.cfg.Now().Sub(j.EnqueuedAt), 0)
	}
	return ls, nil
}
