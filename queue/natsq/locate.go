package natsq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/queue"
)

var (
	_ queue.Locator  = (*Queue)(nil)
	_ queue.Canceler = (*Queue)(nil)
)

// spot is where a lookup found a job: its location and its message.
type spot struct {
	loc    queue.Location
	seq    uint64           // the message's sequence in its stream
	stream jetstream.Stream // the main stream or the dead letter stream
}

// Locate implements queue.Locator. It reads the queue's messages one
// message get each (ready and delayed subjects, then the dead letters), so
// a lookup costs one round trip per job in the queue before it; JetStream
// has no index by job id. A job on a delayed subject is delayed (due ones
// the mover has not moved yet too). A job on a ready subject at or below
// its lane consumer's delivered sequence is in flight: JetStream does not
// tell a job a consumer holds from one due again after its visibility
// timeout or released at a replica's shutdown, so those show in flight
// too, until a consumer fetches them again.
func (q *Queue) Locate(ctx context.Context, id string) (queue.Location, error) {
	if q.closed() {
		return queue.Location{}, fmt.Errorf("natsq: locate %s: %w", id, queue.ErrClosed)
	}
	s, err := q.find(ctx, id)
	if err != nil {
		return queue.Location{}, fmt.Errorf("natsq: locate %s: %w", id, err)
	}
	return s.loc, nil
}

// Cancel implements queue.Canceler by deleting the job's message. A
// waiting job's message is deleted when its lane consumer has not been
// given it; JetStream cannot check and delete in one step, so a job
// cancelled in the very instant a dispatcher fetches it may still be sent.
// A delayed job cancelled in the instant the mover moves it may be moved
// anyway.
func (q *Queue) Cancel(ctx context.Context, id string) (queue.State, error) {
	if q.closed() {
		return "", fmt.Errorf("natsq: cancel %s: %w", id, queue.ErrClosed)
	}
	s, err := q.find(ctx, id)
	if err != nil {
		return "", fmt.Errorf("natsq: cancel %s: %w", id, err)
	}
	switch s.loc.State {
	case queue.StateUnknown:
		return s.loc.State, fmt.Errorf("natsq: cancel %s: %w", id, queue.ErrNotFound)
	case queue.StateInFlight:
		return s.loc.State, fmt.Errorf("natsq: cancel %s: %w", id, queue.ErrInFlight)
	}
	err = s.stream.DeleteMsg(ctx, s.seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return queue.StateUnknown, fmt.Errorf("natsq: cancel %s: %w: it left the queue while being cancelled", id, queue.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("natsq: cancel %s: %w", id, err)
	}
	return s.loc.State, nil
}

// find looks for the job in the main stream, then in the dead letters.
func (q *Queue) find(ctx context.Context, id string) (spot, error) {
	delivered := map[string]uint64{} // lane -> its consumer's delivered stream sequence
	for _, lane := range q.cfg.Lanes {
		ci, err := q.lanes[lane].Info(ctx)
		if err != nil {
			return spot{}, err
		}
		delivered[lane] = ci.Delivered.Stream
	}
	all := "sluice." + q.cfg.Name + ".*.*"
	for seq := uint64(1); ; {
		m, err := q.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(all))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return spot{}, err
		}
		seq = m.Sequence + 1
		j, ok := jobWithID(m.Data, id)
		if !ok {
			continue
		}
		lane := laneOf(m.Subject)
		st := queue.StateWaiting
		switch {
		case m.Subject == q.n.delayed(lane):
			st = queue.StateDelayed
		case m.Sequence <= delivered[lane]:
			st = queue.StateInFlight
		}
		return spot{loc: queue.Location{State: st, Job: j}, seq: m.Sequence, stream: q.stream}, nil
	}
	var s spot
	err := q.scanDead(ctx, func(m *jetstream.RawStreamMsg, dl queue.DeadLetter) (bool, error) {
		if dl.Job.ID != id {
			return true, nil
		}
		s = spot{loc: queue.Location{State: queue.StateDead, Job: &dl.Job, Reason: dl.Reason}, seq: m.Sequence, stream: q.dead}
		return false, nil
	})
	if err != nil {
		return spot{}, err
	}
	if s.stream == nil {
		s.loc.State = queue.StateUnknown
	}
	return s, nil
}

// jobWithID decodes a message's job when it has the id.
func jobWithID(data []byte, id string) (*queue.Job, bool) {
	var head struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(data, &head) != nil || head.ID != id {
		return nil, false
	}
	var j queue.Job
	if json.Unmarshal(data, &j) != nil {
		return nil, false
	}
	return &j, true
}
