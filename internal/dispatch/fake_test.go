package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
)

// memQueue is an in-memory queue.Queue for engine tests: FIFO lanes,
// blocking Fetch, and deliveries that record how they were settled.
type memQueue struct {
	mu       sync.Mutex
	cond     *sync.Cond
	lanes    map[string][]*queue.Job
	settled  []*memDelivery
	fetched  int
	maxAttem int
	extends  map[string]int // Extend calls per job id
}

func newMemQueue(lanes ...string) *memQueue {
	q := &memQueue{lanes: map[string][]*queue.Job{}, maxAttem: 3}
	q.cond = sync.NewCond(&q.mu)
	for _, l := range lanes {
		q.lanes[l] = nil
	}
	return q
}

func (q *memQueue) Enqueue(_ context.Context, jobs ...*queue.Job) ([]queue.EnqueueResult, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []queue.EnqueueResult
	for _, j := range jobs {
		if j.Cost == 0 {
			j.Cost = 1
		}
		if j.EnqueuedAt.IsZero() {
			j.EnqueuedAt = time.Now()
		}
		q.lanes[j.Lane] = append(q.lanes[j.Lane], j)
		out = append(out, queue.EnqueueResult{ID: j.ID})
	}
	q.cond.Broadcast()
	return out, nil
}

func (q *memQueue) Fetch(ctx context.Context, lane string, n int) ([]queue.Delivery, error) {
	stop := context.AfterFunc(ctx, func() { q.mu.Lock(); q.cond.Broadcast(); q.mu.Unlock() })
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.lanes[lane]) == 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.cond.Wait()
	}
	take := min(n, len(q.lanes[lane]))
	var out []queue.Delivery
	for _, j := range q.lanes[lane][:take] {
		j.Attempt++
		q.fetched++
		out = append(out, &memDelivery{q: q, job: j})
	}
	q.lanes[lane] = q.lanes[lane][take:]
	return out, nil
}

// fetchedCount is how many deliveries Fetch has handed out.
func (q *memQueue) fetchedCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.fetched
}

func (q *memQueue) ListDead(context.Context, int) ([]queue.DeadLetter, error) { return nil, nil }
func (q *memQueue) Requeue(context.Context, ...string) (int, error)           { return 0, nil }
func (q *memQueue) Close() error                                              { return nil }

func (q *memQueue) Stats(context.Context) (queue.Stats, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var st queue.Stats
	for l, jobs := range q.lanes {
		st.Lanes = append(st.Lanes, queue.LaneStats{Lane: l, Ready: int64(len(jobs))})
	}
	return st, nil
}

// outcomes returns how each settled delivery ended, by job id.
func (q *memQueue) outcomes() map[string]*memDelivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[string]*memDelivery{}
	for _, d := range q.settled {
		out[d.job.ID] = d
	}
	return out
}

func (q *memQueue) settledCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.settled)
}

type memDelivery struct {
	q      *memQueue
	job    *queue.Job
	how    string // ack, retry, dead, release
	reason string
	delay  time.Duration
}

func (d *memDelivery) Job() *queue.Job { return d.job }

func (d *memDelivery) settle(how, reason string, delay time.Duration) {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	d.how, d.reason, d.delay = how, reason, delay
	d.q.settled = append(d.q.settled, d)
}

func (d *memDelivery) Ack(context.Context) error { d.settle("ack", "", 0); return nil }
func (d *memDelivery) Retry(_ context.Context, delay time.Duration, reason string) (bool, error) {
	if d.job.Attempt >= d.q.maxAttem {
		d.settle("dead", reason, 0)
		return true, nil
	}
	d.settle("retry", reason, delay)
	return false, nil
}
func (d *memDelivery) DeadLetter(_ context.Context, reason string) error {
	d.settle("dead", reason, 0)
	return nil
}
func (d *memDelivery) Extend(context.Context) error {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	if d.q.extends == nil {
		d.q.extends = map[string]int{}
	}
	d.q.extends[d.job.ID]++
	return nil
}

// extended returns how many times job id was extended.
func (q *memQueue) extended(id string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.extends[id]
}
func (d *memDelivery) Release(context.Context) error { d.settle("release", "", 0); return nil }

// gatePacer grants a slot each time the test sends on gate (or at once
// when gate is nil), and records throttles and forfeits. Its slots fall
// when TakeAhead returns and have an hour to go, except the first late ones,
// which are past their deadline already.
type gatePacer struct {
	gate      chan struct{}
	mu        sync.Mutex
	late      int // how many of the next slots are already late
	slots     int
	throttles []time.Duration
	forfeits  []pacer.Slot
	aheads    []time.Duration       // each TakeAhead's ahead
	holds     int                   // Hold calls
	holdFor   time.Duration         // how long each Hold waits (the slot still to come)
	aside     atomic.Pointer[error] // Aside's answer, and TakeAhead's error, when set
}

// Hold counts the call and returns after holdFor (at once by default:
// the fake's slots have come when TakeAhead returns).
func (p *gatePacer) Hold(ctx context.Context, _ pacer.Slot) error {
	p.mu.Lock()
	p.holds++
	wait := p.holdFor
	p.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}

func (p *gatePacer) TakeAhead(ctx context.Context, n int, ahead time.Duration) (pacer.Slot, error) {
	p.mu.Lock()
	p.aheads = append(p.aheads, ahead)
	p.mu.Unlock()
	if err := p.Aside(); err != nil {
		return pacer.Slot{}, err
	}
	for range n {
		if p.gate != nil {
			select {
			case <-p.gate:
			case <-ctx.Done():
				return pacer.Slot{}, ctx.Err()
			}
		}
		p.mu.Lock()
		p.slots++
		p.mu.Unlock()
	}
	now := time.Now()
	s := pacer.Slot{At: now, Deadline: now.Add(time.Hour), Stamp: now}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.late > 0 {
		p.late--
		s = pacer.Slot{At: now.Add(-2 * time.Second), Deadline: now.Add(-time.Second), Stamp: now.Add(-2 * time.Second)}
	}
	return s, ctx.Err()
}

func (p *gatePacer) Forfeit(s pacer.Slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forfeits = append(p.forfeits, s)
}

func (p *gatePacer) forfeited() []pacer.Slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pacer.Slot(nil), p.forfeits...)
}

func (p *gatePacer) Aside() error {
	if e := p.aside.Load(); e != nil {
		return *e
	}
	return nil
}

func (p *gatePacer) Throttle(_ context.Context, d time.Duration) (time.Time, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.throttles = append(p.throttles, d)
	return time.Now().Add(d), nil
}

func (p *gatePacer) count() (int, []time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slots, append([]time.Duration(nil), p.throttles...)
}
