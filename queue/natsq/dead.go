package natsq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sluicehq/sluice/queue"
)

// ListDead implements queue.DeadLetters. It reads the dead letter stream in
// stream order (oldest first), one message get per dead letter;
// limit <= 0 means all of them.
func (q *Queue) ListDead(ctx context.Context, limit int) ([]queue.DeadLetter, error) {
	if q.closed() {
		return nil, fmt.Errorf("natsq: list dead: %w", queue.ErrClosed)
	}
	var out []queue.DeadLetter
	err := q.scanDead(ctx, func(m *jetstream.RawStreamMsg, dl queue.DeadLetter) (bool, error) {
		out = append(out, dl)
		return limit <= 0 || len(out) < limit, nil
	})
	if err != nil {
		return nil, fmt.Errorf("natsq: list dead: %w", err)
	}
	return out, nil
}

// ErrUnknownLane is returned by Requeue, with WithKeepLanes, for dead
// letters whose lane is not one of the queue's lanes.
var ErrUnknownLane = errors.New("natsq: lane not in queue.lanes")

// WithKeepLanes makes Requeue leave a dead letter whose lane is not one of
// the queue's lanes where it is, and name it in an error matching
// ErrUnknownLane, instead of putting it in the last lane: for a process
// whose lanes may not be those the dispatchers read (an admin command run
// without their configuration).
func WithKeepLanes() Option { return func(o *options) { o.keepLanes = true } }

// Requeue implements queue.DeadLetters. Each dead letter is published to
// its lane's ready subject (the last lane when its lane is gone; with
// WithKeepLanes it is left and named in the error) with its attempts
// reset, then deleted from the dead letter stream; the publish carries a
// message id derived from the dead letter, so a Requeue repeated after a
// failure between the two steps stores the job once.
func (q *Queue) Requeue(ctx context.Context, ids ...string) (int, error) {
	if q.closed() {
		return 0, fmt.Errorf("natsq: requeue: %w", queue.ErrClosed)
	}
	found := map[string]bool{}
	var left []string
	n := 0
	err := q.scanDead(ctx, func(m *jetstream.RawStreamMsg, dl queue.DeadLetter) (bool, error) {
		if len(ids) > 0 && !slices.Contains(ids, dl.Job.ID) {
			return true, nil
		}
		if _, ok := q.lanes[dl.Job.Lane]; !ok && q.keepLanes {
			found[dl.Job.ID] = true
			left = append(left, dl.Job.ID+" (lane "+dl.Job.Lane+")")
			return true, nil
		}
		if err := q.requeueOne(ctx, m, dl.Job); err != nil {
			return false, err
		}
		found[dl.Job.ID] = true
		n++
		return true, nil
	})
	if err != nil {
		return n, fmt.Errorf("natsq: requeue: %w", err)
	}
	var missing []string
	for _, id := range ids {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	var errs []error
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("natsq: requeue: %w: no dead letter with id %s", queue.ErrNotFound, strings.Join(missing, ", ")))
	}
	if len(left) > 0 {
		errs = append(errs, fmt.Errorf("natsq: requeue: %w (%s): left as dead letters: %s", ErrUnknownLane,
			strings.Join(q.cfg.Lanes, ", "), strings.Join(left, ", ")))
	}
	return n, errors.Join(errs...)
}

// requeueOne moves one dead letter back into its lane.
func (q *Queue) requeueOne(ctx context.Context, m *jetstream.RawStreamMsg, j queue.Job) error {
	if _, ok := q.lanes[j.Lane]; !ok {
		j.Lane = q.cfg.DefaultLane()
	}
	j.Attempt = 0
	body, err := json.Marshal(&j)
	if err != nil {
		return err
	}
	out := nats.NewMsg(q.n.ready(j.Lane))
	out.Data = body
	out.Header.Set(jetstream.MsgIDHeader, derivedMsgID("q", m.Sequence, m.Time))
	if _, err := q.js.PublishMsg(ctx, out); err != nil {
		return fmt.Errorf("job %s: %w", j.ID, err)
	}
	if err := q.dead.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("job %s: delete dead letter %d: %w", j.ID, m.Sequence, err)
	}
	return nil
}

// scanDead calls fn with every dead letter, oldest first, while fn returns
// true. It asks for the next message on the dead letter subject from the
// sequence after the last one, so deleted dead letters cost nothing.
func (q *Queue) scanDead(ctx context.Context, fn func(*jetstream.RawStreamMsg, queue.DeadLetter) (bool, error)) error {
	for seq := uint64(1); ; {
		m, err := q.dead.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(q.n.dead()))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		seq = m.Sequence + 1
		more, err := fn(m, readDead(m))
		if err != nil || !more {
			return err
		}
	}
}

// readDead decodes a dead letter message.
func readDead(m *jetstream.RawStreamMsg) queue.DeadLetter {
	var dl queue.DeadLetter
	if err := json.Unmarshal(m.Data, &dl.Job); err != nil {
		dl.Job = unreadable(fmt.Sprintf("unreadable-%d", m.Sequence), "", m.Data)
		dl.Job.LastError = fmt.Sprintf("unreadable dead letter (sequence %d): %v", m.Sequence, err)
	}
	dl.Reason = dl.Job.LastError
	dl.At = m.Time
	if at, err := time.Parse(time.RFC3339Nano, m.Header.Get(hdrDeadAt)); err == nil {
		dl.At = at
	}
	return dl
}
