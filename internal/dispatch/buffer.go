package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
)

// held is a fetched delivery waiting for its slot, or with its request
// open (openRequests).
type held struct {
	d       queue.Delivery
	fetched time.Time // when fetched or last extended; zero when not known
	key     uint64    // names the entry to restamp in the lane buffer; unique there
}

// due is a held delivery that keep-alive is to extend (stale returned
// it), with its key in its holder, for restamp when its Extend fails.
type due struct {
	d   queue.Delivery
	key uint64
}

// laneBuffer holds the jobs fetched ahead of their slots, one FIFO per
// lane, and hands them out by the priority scheduler when a slot comes. It
// only holds: what to fetch, and what to do with an expired job, is the
// engine's business. It is safe for concurrent use.
type laneBuffer struct {
	mu      sync.Mutex
	room    *sync.Cond // a lane was emptied below its mark, or the buffer drained
	names   []string   // lane names, highest priority first
	lanes   [][]held   // lanes[i] holds names[i]'s jobs, oldest first
	sched   *priority.Scheduler
	ready   []bool        // scratch for sched.Next
	readyCh chan struct{} // signalled when a job is added
	keys    uint64        // the last key given to an entry
}

// newLaneBuffer returns an empty buffer for the lanes names (highest
// priority first), picking by sched.
func newLaneBuffer(names []string, sched *priority.Scheduler) *laneBuffer {
	b := &laneBuffer{
		names:   names,
		lanes:   make([][]held, len(names)),
		sched:   sched,
		ready:   make([]bool, 0, len(names)),
		readyCh: make(chan struct{}, 1),
	}
	b.room = sync.NewCond(&b.mu)
	return b
}

// len returns how many jobs lane i holds.
func (b *laneBuffer) len(i int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.lanes[i])
}

// stock appends ds to the back of lane i, fetched at now.
func (b *laneBuffer) stock(i int, ds []queue.Delivery, now time.Time) {
	if len(ds) == 0 {
		return
	}
	b.mu.Lock()
	for _, d := range ds {
		b.keys++
		b.lanes[i] = append(b.lanes[i], held{d: d, fetched: now, key: b.keys})
	}
	b.mu.Unlock()
	b.signal()
}

// pick removes and returns the job the scheduler chooses: the first of the
// lane it picks among those holding jobs. It returns false when every
// lane is empty.
func (b *laneBuffer) pick() (queue.Delivery, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ready := b.ready[:0]
	for _, l := range b.lanes {
		ready = append(ready, len(l) > 0)
	}
	i, ok := b.sched.Next(ready)
	if !ok {
		return nil, false
	}
	d := b.lanes[i][0].d
	b.lanes[i][0] = held{}
	b.lanes[i] = b.lanes[i][1:]
	b.room.Broadcast()
	return d, true
}

// putBack returns d to the front of its job's lane, so that it goes next
// in that lane. When d was last extended is not known (it may have been in
// flight for a long request), so stale returns it at its next call. A
// delivery of a lane the buffer does not hold is returned as false.
func (b *laneBuffer) putBack(d queue.Delivery) bool {
	b.mu.Lock()
	found := false
	for i, name := range b.names {
		if name == d.Job().Lane {
			b.keys++
			b.lanes[i] = append([]held{{d: d, key: b.keys}}, b.lanes[i]...)
			found = true
			break
		}
	}
	b.mu.Unlock()
	if found {
		b.signal()
	}
	return found
}

// drain empties the buffer and returns what it held, highest lane first.
func (b *laneBuffer) drain() []queue.Delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []queue.Delivery
	for i, l := range b.lanes {
		for _, h := range l {
			out = append(out, h.d)
		}
		b.lanes[i] = nil
	}
	b.room.Broadcast()
	return out
}

// waitForRoom blocks until lane i holds at most half of target jobs (or
// none), then returns how many to fetch to reach target. It returns
// ctx's error when ctx ends first.
func (b *laneBuffer) waitForRoom(ctx context.Context, i, target int) (int, error) {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.room.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n := len(b.lanes[i])
		if n == 0 || n <= target/2 {
			return target - n, nil
		}
		b.room.Wait()
	}
}

// waitReady blocks until some lane holds a job; false when ctx ended
// first.
func (b *laneBuffer) waitReady(ctx context.Context) bool {
	for !b.anyReady() {
		select {
		case <-b.readyCh:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// anyReady reports whether some lane holds a job.
func (b *laneBuffer) anyReady() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lanes {
		if len(l) > 0 {
			return true
		}
	}
	return false
}

// signal wakes a waitReady.
func (b *laneBuffer) signal() {
	select {
	case b.readyCh <- struct{}{}:
	default:
	}
}

// stale returns the deliveries held since before now-age (or put back
// since the last call) and marks them fresh at now: the caller extends
// them with the queue, so that no other consumer gets them while they
// wait for a slot, and restamps those whose Extend failed.
func (b *laneBuffer) stale(now time.Time, age time.Duration) []due {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []due
	for _, l := range b.lanes {
		for k := range l {
			if now.Sub(l[k].fetched) >= age {
				out = append(out, due{d: l[k].d, key: l[k].key})
				l[k].fetched = now
			}
		}
	}
	return out
}

// restamp marks the entries of failed (returned by stale, their Extend
// failed) as not extended (a zero stamp, as a put-back job's), so that the
// next call of stale returns them again rather than a third of the
// visibility timeout later. Entries no longer held (picked since, or
// picked and put back under a new key, which stale returns at once
// anyway) are left alone.
func (b *laneBuffer) restamp(failed []due) {
	if len(failed) == 0 {
		return
	}
	keys := make(map[uint64]bool, len(failed))
	for _, x := range failed {
		keys[x.key] = true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lanes {
		for k := range l {
			if keys[l[k].key] {
				l[k].fetched = time.Time{}
			}
		}
	}
}
