package mockprovider

import "sync/atomic"

// openRequests counts the job requests being handled at once, and the
// most ever: for providers that limit open connections (a cluster-wide
// bound on requests in flight is judged by it).
type openRequests struct {
	now, most atomic.Int64
}

// begin counts a request in; the returned function counts it out.
func (o *openRequests) begin() func() {
	n := o.now.Add(1)
	for m := o.most.Load(); n > m && !o.most.CompareAndSwap(m, n); m = o.most.Load() {
	}
	return func() { o.now.Add(-1) }
}

// MaxOpen returns the most job requests that were open at the provider at
// once (from reaching the handler until their answer was written) since
// the provider started.
func (p *Provider) MaxOpen() int64 { return p.open.most.Load() }

// Open returns the job requests open at the provider now.
func (p *Provider) Open() int64 { return p.open.now.Load() }
