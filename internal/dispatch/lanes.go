package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// held is a fetched delivery waiting for its slot.
type held struct {
	d       queue.Delivery
	fetched time.Time // when fetched or last extended
}

// lane holds the jobs fetched ahead of their slots for one lane. Its fields
// are guarded by the engine's mutex.
type lane struct {
	name string
	jobs []held
}

// fetchLoop keeps lane i stocked with up to target jobs, fetching only when
// the lane runs low, until ctx ends.
func (e *Engine) fetchLoop(ctx context.Context, i int) {
	l := e.lanes[i]
	lowest := i == len(e.lanes)-1
	failures := 0
	for {
		replicas := int(e.replicas.Load())
		want, err := e.waitForRoom(ctx, i, e.cfg.laneTarget(lowest, replicas))
		if err != nil {
			return
		}
		ds, err := e.q.Fetch(ctx, l.name, min(want, e.cfg.fetchChunk(replicas)))
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, queue.ErrClosed) {
				return
			}
			failures++
			e.backendError("queue", err)
			if sleep(ctx, e.retryDelay(failures)) != nil {
				return
			}
			continue
		}
		failures = 0
		e.setHealthy("queue")
		e.stock(ctx, i, ds)
	}
}

// waitForRoom blocks until lane i holds fewer than half its target (or
// nothing), then returns how many jobs to fetch.
func (e *Engine) waitForRoom(ctx context.Context, i, target int) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n := len(e.lanes[i].jobs)
		if n == 0 || n <= target/2 {
			return target - n, nil
		}
		e.roomCond.Wait()
	}
}

// stock adds fetched deliveries to lane i, dead-lettering expired jobs
// before they can spend a slot.
func (e *Engine) stock(ctx context.Context, i int, ds []queue.Delivery) {
	now := e.cfg.Now()
	fresh := ds[:0]
	for _, d := range ds {
		if d.Job().Expired(now) {
			e.expire(ctx, d)
			continue
		}
		fresh = append(fresh, d)
	}
	if len(fresh) == 0 {
		return
	}
	e.mu.Lock()
	for _, d := range fresh {
		e.lanes[i].jobs = append(e.lanes[i].jobs, held{d: d, fetched: now})
	}
	e.mu.Unlock()
	e.signalReady()
}

// keepAlive extends jobs held longer than a third of the visibility
// timeout, so that no other replica gets them while they wait for a slot.
func (e *Engine) keepAlive(ctx context.Context) {
	every := e.cfg.VisibilityTimeout / 3
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := e.cfg.Now()
		var stale []queue.Delivery
		e.mu.Lock()
		for _, l := range e.lanes {
			for k := range l.jobs {
				if now.Sub(l.jobs[k].fetched) >= every {
					stale = append(stale, l.jobs[k].d)
					l.jobs[k].fetched = now
				}
			}
		}
		e.mu.Unlock()
		for _, d := range stale {
			if err := d.Extend(ctx); err != nil && ctx.Err() == nil {
				e.backendError("queue", err)
			}
		}
	}
}

// pick chooses the job that takes the slot that has just come, by the lane
// policy, and removes it from its lane. It returns false when no lane holds
// a job. Expired jobs met on the way are dead-lettered and skipped.
func (e *Engine) pick(ctx context.Context) (queue.Delivery, bool) {
	now := e.cfg.Now()
	for {
		e.mu.Lock()
		ready := e.ready[:0]
		for _, l := range e.lanes {
			ready = append(ready, len(l.jobs) > 0)
		}
		i, ok := e.sched.Next(ready)
		if !ok {
			e.mu.Unlock()
			return nil, false
		}
		l := e.lanes[i]
		d := l.jobs[0].d
		l.jobs[0] = held{}
		l.jobs = l.jobs[1:]
		e.roomCond.Broadcast()
		e.mu.Unlock()
		if d.Job().Expired(now) {
			e.expire(ctx, d)
			continue
		}
		return d, true
	}
}

// putBack returns a delivery to the front of its lane (after a throttling
// answer or when its slot could not be had), so it goes next.
func (e *Engine) putBack(d queue.Delivery) {
	e.mu.Lock()
	for _, l := range e.lanes {
		if l.name == d.Job().Lane {
			l.jobs = append([]held{{d: d, fetched: e.cfg.Now()}}, l.jobs...)
			break
		}
	}
	e.mu.Unlock()
	e.signalReady()
}

// anyReady reports whether some lane holds a job.
func (e *Engine) anyReady() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range e.lanes {
		if len(l.jobs) > 0 {
			return true
		}
	}
	return false
}

// signalReady wakes the slot loop.
func (e *Engine) signalReady() {
	select {
	case e.readyCh <- struct{}{}:
	default:
	}
}

// drain removes every held delivery, for release at shutdown.
func (e *Engine) drain() []queue.Delivery {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []queue.Delivery
	for _, l := range e.lanes {
		for _, h := range l.jobs {
			out = append(out, h.d)
		}
		l.jobs = nil
	}
	e.roomCond.Broadcast()
	return out
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
