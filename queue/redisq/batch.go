package redisq

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/queue"
)

var (
	_ queue.BatchAcker = (*Queue)(nil)
	_ queue.Releaser   = (*delivery)(nil)
)

// AckBatch implements queue.BatchAcker: one script call per lane acks the
// lane's deliveries. A delivery that is not this queue's, or was settled
// before, gets an error wrapping queue.ErrSettled.
func (q *Queue) AckBatch(ctx context.Context, ds []queue.Delivery) []error {
	errs := make([]error, len(ds))
	byLane := map[string][]int{}
	for i, d := range ds {
		rd, ok := d.(*delivery)
		if !ok || rd.q != q || rd.done.Load() {
			errs[i] = fmt.Errorf("redisq: ack: %w", queue.ErrSettled)
			continue
		}
		byLane[rd.lane] = append(byLane[rd.lane], i)
	}
	for lane, idx := range byLane {
		q.ackLane(ctx, lane, ds, idx, errs)
	}
	return errs
}

// ackLane acks the deliveries ds[idx...] of one lane in one script call.
func (q *Queue) ackLane(ctx context.Context, lane string, ds []queue.Delivery, idx []int, errs []error) {
	// The consumer's other pending entries between the batch's lowest and
	// highest ids (held in its buffer, in flight) come back too: read as
	// many again as the batch, and more, so that ackbatch.lua seldom looks
	// an entry up alone.
	args := make([]any, 0, 5+2*len(idx))
	args = append(args, group, q.cfg.Consumer, nil, nil, 2*len(idx)+ackPendingSlack)
	first := ds[idx[0]].(*delivery).entry
	lo, hi := first, first
	for _, i := range idx {
		d := ds[i].(*delivery)
		if entryLess(d.entry, lo) {
			lo = d.entry
		}
		if entryLess(hi, d.entry) {
			hi = d.entry
		}
		args = append(args, d.entry, d.deliveries)
	}
	args[2], args[3] = lo, hi
	v, err := q.scripts.ackBatch.Run(ctx, q.client, []string{q.keys.lane(lane)}, args...).Result()
	res, ok := v.([]any)
	if err == nil && (!ok || len(res) != len(idx)) {
		err = fmt.Errorf("%w: ack batch of %d got %T %v", errReply, len(idx), v, v)
	}
	for k, i := range idx {
		d := ds[i].(*delivery)
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("redisq: ack: %w", err)
		case res[k] == int64(1):
			d.done.Store(true)
		default:
			d.done.Store(true)
			errs[i] = fmt.Errorf("redisq: ack: %w", queue.ErrSettled)
		}
	}
}

// ackPendingSlack is how many more of the consumer's pending entries than
// twice the batch ackbatch.lua reads between the batch's lowest and
// highest entry ids.
const ackPendingSlack = 64

// entryLess reports whether stream entry id a ("ms-seq") comes before b.
// An id that does not parse compares as its text does: the order only
// bounds the range ackbatch.lua reads, and an entry outside it is looked
// up alone.
func entryLess(a, b string) bool {
	am, as, aok := splitEntry(a)
	bm, bs, bok := splitEntry(b)
	if !aok || !bok {
		return a < b
	}
	return am < bm || am == bm && as < bs
}

// splitEntry parses a stream entry id "ms-seq".
func splitEntry(id string) (ms, seq uint64, ok bool) {
	msText, seqText, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseUint(msText, 10, 64)
	seq, err2 := strconv.ParseUint(seqText, 10, 64)
	return ms, seq, err1 == nil && err2 == nil
}

// Release implements queue.Releaser: the entry goes back to its lane at
// once, claimed by the next fetch of any consumer, without counting an
// attempt.
func (d *delivery) Release(ctx context.Context) error {
	return d.settle(ctx, "release", func() (any, error) {
		return d.q.scripts.release.Run(ctx, d.q.client, []string{d.q.keys.lane(d.lane)},
			group, d.q.cfg.Consumer, d.entry, d.deliveries, d.q.cfg.VisibilityTimeout.Milliseconds()).Result()
	})
}
