package dispatch

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// openRequests is the set of deliveries whose request is open to the
// provider, or whose answer is being settled: the engine keeps them alive
// with the queue as it does the jobs waiting in the lane buffer, so that a
// slow provider does not see a job again from another replica while its
// first request is still open. The zero value is an empty set, safe for
// concurrent use.
type openRequests struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]held
}

// add puts d into the set and returns the key that remove takes it out
// with (a key, not a func: the closure cost an allocation per request).
// The time d was last extended is not known here (it may have waited in
// the buffer since), so the next keep-alive round extends it.
func (o *openRequests) add(d queue.Delivery) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[uint64]held{}
	}
	o.next++
	o.m[o.next] = held{d: d}
	return o.next
}

// remove takes the delivery add returned k for out of the set.
func (o *openRequests) remove(k uint64) {
	o.mu.Lock()
	delete(o.m, k)
	o.mu.Unlock()
}

// len returns how many deliveries the set holds.
func (o *openRequests) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m)
}

// stale returns the deliveries extended before now-age (or not since they
// were added) and marks them extended at now; the caller extends them,
// and restamps those whose Extend failed.
func (o *openRequests) stale(now time.Time, age time.Duration) []due {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []due
	for k, h := range o.m {
		if now.Sub(h.fetched) >= age {
			out = append(out, due{d: h.d, key: k})
			h.fetched = now
			o.m[k] = h
		}
	}
	return out
}

// restamp marks the deliveries of failed (returned by stale, their Extend
// failed) as not extended (a zero stamp, as a newly added one's), so that
// the next call of stale returns them again. Those removed since are left
// out.
func (o *openRequests) restamp(failed []due) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, x := range failed {
		if h, ok := o.m[x.key]; ok {
			h.fetched = time.Time{}
			o.m[x.key] = h
		}
	}
}
